package mcptools

import (
	"context"
	"encoding/json"
	"errors"

	api "svc.dev/clients/apiclient"
)

// ToolError is a tool call that failed: the API's error code and message and
// the rest of its answer (validation_errors, issues, retryAfterMs...). Its text, which the
// model reads, is that answer as JSON with the HTTP status added.
type ToolError struct {
	Code    string
	Message string
	Status  int
	// Body is the API's answer, when it was a JSON object.
	Body map[string]any
}

func (e *ToolError) Error() string {
	out := map[string]any{}
	for k, v := range e.Body {
		out[k] = v
	}
	delete(out, "code") // the auth layer's member name; "error" carries it here
	out["error"] = e.Code
	if e.Message != "" {
		out["message"] = e.Message
	}
	if e.Status != 0 {
		out["status"] = e.Status
	}
	b, err := json.Marshal(out)
	if err != nil {
		return e.Code + ": " + e.Message
	}
	return string(b)
}

// toolError turns any failure into a ToolError; the SDK reports it as a tool result with
// isError set, which a model can read and act on (a protocol error it could not).
func toolError(err error) error {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		out := &ToolError{Code: apiErr.Code, Message: apiErr.Message, Status: apiErr.Status}
		var body map[string]any
		if json.Unmarshal(apiErr.Body, &body) == nil {
			out.Body = body
		}
		if out.Code == "" {
			out.Code = "http_error"
		}
		return out
	}
	var tr *api.TransportError
	switch {
	case errors.As(err, &tr):
		return &ToolError{Code: "unavailable", Message: tr.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &ToolError{Code: "cancelled", Message: err.Error()}
	}
	return &ToolError{Code: "internal", Message: err.Error()}
}

func asAPIError(err error, target **api.Error) bool { return errors.As(err, target) }

// invalidArgument is a tool argument the API would refuse or that the tool cannot use.
func invalidArgument(msg string) error {
	return &ToolError{Code: "invalid_argument", Message: msg, Status: 400}
}
