// Package route models webhook routes: Go values registered at boot that say which requests
// they take (method and a path template with :param segments), how a request becomes a run
// input (FromRequest, the trust boundary where signatures are checked), which schema that input
// must satisfy, and which deterministic key makes a redelivery a duplicate.
package route

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Request is what a route sees of one delivery.
type Request struct {
	// Body is the parsed JSON body when the content type is application/json, otherwise an
	// empty object (map[string]any{}). Numbers are json.Number, so no precision is lost.
	Body any
	// Headers are the request headers as received.
	Headers http.Header
	// RawBody is the body exactly as received: signatures are computed over these bytes.
	RawBody []byte
	// Params are the values of the path template's :param segments.
	Params map[string]string
	// ContentType is the media type of the body without parameters ("application/json"), or "".
	ContentType string
}

// Route is one webhook route. All members are required.
type Route struct {
	// Path is the template under /api/webhooks: "/github", "/events/:source".
	Path string
	// Method is the HTTP method ("POST").
	Method string
	// Organization names the organization that owns the runs (its slug, or its id).
	Organization string
	// WorkflowName is the name of the workflow to run, within Organization.
	WorkflowName string
	// InputSchema is the JSON Schema the run input must satisfy.
	InputSchema []byte
	// FromRequest builds the run input. It is the trust boundary: it verifies the signature and
	// returns a *SignatureError when that fails; any other error rejects the delivery.
	FromRequest func(ctx context.Context, req Request) (any, error)
	// IdempotencyKey returns the delivery's deterministic key; a redelivery returns the same.
	IdempotencyKey func(req Request) (string, error)
	// SignedBodyOnly says the signature covers the raw body alone (GitHub's
	// X-Hub-Signature-256), so whoever saw one delivery can replay it with any headers,
	// IdempotencyKey's included. The body's SHA-256 is then a second key: a replay of the same
	// signed body within the key's lifetime answers the first delivery's run. Optional (false:
	// the key is signed, as Standard Webhooks' webhook-id is).
	SignedBodyOnly bool
}

// ID names the route in idempotency keys and logs: method and template, "POST /events/:source".
func (r Route) ID() string { return r.Method + " " + r.Path }

// SignatureError says a delivery's signature is missing, malformed, wrong or outside the time
// tolerance. FromRequest returns it so that the sender is told invalid_signature.
type SignatureError struct{ Reason string }

func (e *SignatureError) Error() string { return "invalid signature: " + e.Reason }

// RejectedError is a delivery a route refuses for another reason than its signature (a wrong
// content type, a missing header); the message is shown to the sender.
type RejectedError struct{ Reason string }

func (e *RejectedError) Error() string { return e.Reason }

// Rejectf returns a *RejectedError.
func Rejectf(format string, args ...any) error {
	return &RejectedError{Reason: fmt.Sprintf(format, args...)}
}

// ErrInvalid marks a route that cannot be registered.
var ErrInvalid = errors.New("invalid route")
