package route

// The webhook routes this service ships: GitHub and Standard Webhooks. Each is built from its
// settings and registered at boot only when its secret is configured.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/webhook-ingress/internal/domain/signature"
)

// maxKeyLength bounds an idempotency key a sender chooses.
const maxKeyLength = 255

// Target says where a route's runs go.
type Target struct {
	// Organization is the organization's slug or id; WorkflowName the workflow's name in it.
	Organization, WorkflowName string
}

// GitHubInputSchema is the run input of the GitHub route: the event name, the delivery id and
// the payload as GitHub sent it.
const GitHubInputSchema = `{
  "type": "object",
  "required": ["event", "delivery", "payload"],
  "properties": {
    "event": {"type": "string", "minLength": 1},
    "delivery": {"type": "string", "minLength": 1},
    "payload": {"type": "object"}
  },
  "additionalProperties": false
}`

// GitHub is POST /github: X-Hub-Signature-256 over the raw body with secret, key
// X-GitHub-Delivery, input {event, delivery, payload}. As for every route, a body that is not
// application/json is the empty object (docs/API.md, "Webhooks"): a form-encoded delivery
// dispatches with payload {} once its signature over the raw bytes holds.
func GitHub(secret []byte, t Target) Route {
	return Route{
		Path: "/github", Method: http.MethodPost,
		Organization: t.Organization, WorkflowName: t.WorkflowName,
		InputSchema: []byte(GitHubInputSchema),
		FromRequest: func(_ context.Context, req Request) (any, error) {
			if err := signature.VerifyGitHub(secret, req.Headers.Get(signature.GitHubHeader), req.RawBody); err != nil {
				return nil, &SignatureError{Reason: signature.GitHubHeader + ": " + err.Error()}
			}
			event := req.Headers.Get("X-GitHub-Event")
			if event == "" {
				return nil, Rejectf("the X-GitHub-Event header is required")
			}
			return map[string]any{"event": event, "delivery": req.Headers.Get("X-GitHub-Delivery"), "payload": req.Body}, nil
		},
		IdempotencyKey: func(req Request) (string, error) {
			return headerKey(req, "X-GitHub-Delivery")
		},
		// Only the body is signed: a captured delivery replayed under a new X-GitHub-Delivery
		// must not start a second run.
		SignedBodyOnly: true,
	}
}

// StandardInputSchema is the run input of the Standard Webhooks route: {source, event}.
const StandardInputSchema = `{
  "type": "object",
  "required": ["source", "event"],
  "properties": {
    "source": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
    "event": {"type": "object"}
  },
  "additionalProperties": false
}`

// StandardWebhooks is POST /events/:source: a Standard Webhooks signature (webhook-id,
// webhook-timestamp, webhook-signature, 5-minute tolerance) with key, key webhook-id, input
// {source, event: <body>}; a body of another content type is {} (its signature is still
// checked over the raw bytes). now is the clock the tolerance is measured with.
func StandardWebhooks(key []byte, t Target, now func() time.Time) Route {
	return Route{
		Path: "/events/:source", Method: http.MethodPost,
		Organization: t.Organization, WorkflowName: t.WorkflowName,
		InputSchema: []byte(StandardInputSchema),
		FromRequest: func(_ context.Context, req Request) (any, error) {
			err := signature.VerifyStandard(key, signature.StandardDelivery{
				ID:        req.Headers.Get(signature.StandardIDHeader),
				Timestamp: req.Headers.Get(signature.StandardTimestampHeader),
				Signature: req.Headers.Get(signature.StandardSignatureHeader),
				Body:      req.RawBody,
			}, now())
			if err != nil {
				return nil, &SignatureError{Reason: standardReason(err)}
			}
			return map[string]any{"source": req.Params["source"], "event": req.Body}, nil
		},
		IdempotencyKey: func(req Request) (string, error) {
			return headerKey(req, signature.StandardIDHeader)
		},
	}
}

func standardReason(err error) string {
	switch {
	case errors.Is(err, signature.ErrStale):
		return "webhook-timestamp is more than 5 minutes from the current time"
	case errors.Is(err, signature.ErrMissing):
		return "webhook-id, webhook-timestamp and webhook-signature are required"
	case errors.Is(err, signature.ErrMalformed):
		return "webhook-timestamp or webhook-signature is malformed"
	default:
		return "webhook-signature does not match the payload"
	}
}

func headerKey(req Request, name string) (string, error) {
	k := req.Headers.Get(name)
	switch {
	case k == "":
		return "", Rejectf("the %s header is required", name)
	case len(k) > maxKeyLength:
		return "", Rejectf("the %s header must be at most %d characters", name, maxKeyLength)
	case !wire.PlainText(k):
		// A header may carry any byte; the key is stored as text and compared as such.
		return "", Rejectf("the %s header must be UTF-8 text without control characters", name)
	}
	return k, nil
}
