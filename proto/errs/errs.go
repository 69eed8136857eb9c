// Package errs is the one vocabulary of public error codes: each code has exactly one HTTP
// status, and every error leaves a service as the JSON body {"error": code, "message"?, ...}.
// Services map their domain errors onto these codes once, in their own error table.
package errs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, public error code.
type Code string

// The public codes (docs/API.md, The error codes), and one for failures that must not leak.
const (
	Unauthorized         Code = "unauthorized"
	NoActiveOrganization Code = "no_active_organization"
	NotFound             Code = "not_found"
	MethodNotAllowed     Code = "method_not_allowed"
	InvalidBody          Code = "invalid_body"
	InvalidQuery         Code = "invalid_query"
	InvalidCron          Code = "invalid_cron"
	InvalidIfMatch       Code = "invalid_if_match"
	VersionMismatch      Code = "version_mismatch"
	RateLimited          Code = "rate_limited"
	WorkflowNotFound     Code = "workflow_not_found"
	WorkflowNameTaken    Code = "workflow_name_taken"
	WorkflowInvalid      Code = "workflow_invalid"
	RunFinished          Code = "run_finished"
	PayloadTooLarge      Code = "payload_too_large"
	InvalidSignature     Code = "invalid_signature"
	WebhookRejected      Code = "webhook_rejected"
	DispatchFailed       Code = "dispatch_failed"
	CancelFailed         Code = "cancel_failed"
	LogsFailed           Code = "logs_failed"
	Unavailable          Code = "unavailable"
	// Forbidden is a caller whose role in the organization may not do this (a member
	// changing what only an owner or admin may change).
	Forbidden Code = "forbidden"
	// InvalidOrigin is a state-changing request authenticated by the session cookie whose
	// Origin (or Sec-Fetch-Site, or Referer) does not show it was sent by a trusted page.
	InvalidOrigin Code = "invalid_origin"
	// InternalOnlyLog is a failure whose cause is logged and never sent: the client sees
	// {"error":"internal"}.
	InternalOnlyLog Code = "internal"
)

// Status is the HTTP status of the code; unknown codes are 500.
func (c Code) Status() int {
	switch c {
	case Unauthorized, NoActiveOrganization, InvalidSignature:
		return http.StatusUnauthorized
	case InvalidOrigin, Forbidden:
		return http.StatusForbidden
	case NotFound, WorkflowNotFound:
		return http.StatusNotFound
	case MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case InvalidBody, InvalidQuery, InvalidCron, InvalidIfMatch, WorkflowInvalid, WebhookRejected:
		return http.StatusBadRequest
	case VersionMismatch:
		return http.StatusPreconditionFailed
	case RateLimited:
		return http.StatusTooManyRequests
	case WorkflowNameTaken, RunFinished:
		return http.StatusConflict
	case PayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Error is a public error: a code, an optional message for the caller, extra body members
// (issues, current, retryAfterMs, ...) and the private cause, which is only logged.
type Error struct {
	Code    Code
	Message string
	Fields  map[string]any
	Cause   error
}

// New wraps cause under code. The cause is never sent to the client.
func New(code Code, cause error) *Error { return &Error{Code: code, Cause: cause} }

// Newf returns an error whose message is sent to the client.
func Newf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithMessage sets the message sent to the client.
func (e *Error) WithMessage(msg string) *Error { e.Message = msg; return e }

// With adds one member to the JSON body.
func (e *Error) With(key string, value any) *Error {
	if e.Fields == nil {
		e.Fields = map[string]any{}
	}
	e.Fields[key] = value
	return e
}

// Status is the HTTP status of the code.
func (e *Error) Status() int { return e.Code.Status() }

func (e *Error) Error() string {
	switch {
	case e.Cause != nil && e.Message != "":
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	case e.Cause != nil:
		return fmt.Sprintf("%s: %v", e.Code, e.Cause)
	case e.Message != "":
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	default:
		return string(e.Code)
	}
}

func (e *Error) Unwrap() error { return e.Cause }

// Body is the JSON body sent to the client. Fields never override "error" or "message".
func (e *Error) Body() map[string]any {
	body := make(map[string]any, len(e.Fields)+2)
	for k, v := range e.Fields {
		body[k] = v
	}
	body["error"] = string(e.Code)
	delete(body, "message")
	if e.Message != "" && e.Code != InternalOnlyLog {
		body["message"] = e.Message
	}
	return body
}

// From returns err as a public error: itself when it is one, else an internal error.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return New(InternalOnlyLog, err)
}

// Decode turns an error body received from a peer back into an Error. A body that is not of
// the {"error": code} form becomes an internal error naming the status.
func Decode(status int, body []byte) *Error {
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err == nil {
		if code, ok := raw["error"].(string); ok && code != "" {
			e := &Error{Code: Code(code)}
			if msg, ok := raw["message"].(string); ok {
				e.Message = msg
			}
			for k, v := range raw {
				if k != "error" && k != "message" {
					if e.Fields == nil {
						e.Fields = map[string]any{}
					}
					e.Fields[k] = v
				}
			}
			return e
		}
	}
	return New(InternalOnlyLog, fmt.Errorf("peer answered %d without an error body", status))
}
