package command

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"svc.dev/libs/web"
	"svc.dev/services/webhook-ingress/internal/app/port"
	"svc.dev/services/webhook-ingress/internal/domain/route"
)

// KeyTTL is how long a key names its run; the orchestrator keeps its record as long.
const KeyTTL = 24 * time.Hour

// storeTimeout bounds each idempotency-store call: the store is a fast path, and waiting long
// on a sick Redis would cost more than asking the orchestrator, which dedupes anyway.
const storeTimeout = 250 * time.Millisecond

// DeliverWebhook is one delivery to a matched route.
type DeliverWebhook struct {
	Entry   *route.Entry
	Request route.Request
	// Path is the request's path as received ("/api/webhooks/events/acme"), for the trigger.
	Path string
}

// Accepted is a delivery that has its run.
type Accepted struct {
	RunID string
	// Deduplicated is true when the key named an earlier run and nothing started.
	Deduplicated bool
}

// DeliverWebhookHandler turns deliveries into runs, at most one per (route, key).
type DeliverWebhookHandler struct {
	runs port.Dispatcher
	keys port.KeyStore
	orgs port.Organizations
	log  *slog.Logger
}

// NewDeliverWebhookHandler returns the handler; every dependency is required.
func NewDeliverWebhookHandler(runs port.Dispatcher, keys port.KeyStore, orgs port.Organizations, log *slog.Logger) DeliverWebhookHandler {
	if runs == nil || keys == nil || orgs == nil || log == nil {
		panic("nil dispatcher, key store, organizations or logger")
	}
	return DeliverWebhookHandler{runs: runs, keys: keys, orgs: orgs, log: log}
}

// Handle verifies the delivery through its route, checks the input and starts the run, or
// answers the run an earlier delivery with the same key started. Errors: *route.SignatureError,
// *route.RejectedError, *InvalidInputError, *InputTooLargeError, port.ErrWorkflowNotFound,
// *port.DispatchRejectedError, *port.UnavailableError.
//
// Exactly-once: Redis is only the fast path. Two concurrent deliveries with one key may both
// miss it and both call StartRun with the same idempotency key; the orchestrator stores the run
// and its (organization, key) record in one transaction, so the second insert waits for the
// first, finds the record, and answers the first run's id. Both senders get 202 with the same
// workflowRunId. With Redis flushed (or down) every delivery goes to the orchestrator, whose
// record answers the same way. Redis holds key → run id after the first answer, with SET NX so
// that a late writer never replaces what earlier redeliveries were told.
func (h DeliverWebhookHandler) Handle(ctx context.Context, d DeliverWebhook) (Accepted, error) {
	r := d.Entry.Route
	input, err := h.fromRequest(ctx, r, d.Request)
	if err != nil {
		return Accepted{}, err
	}
	key, err := h.idempotencyKey(ctx, r, d.Request)
	if err != nil {
		return Accepted{}, err
	}
	if key == "" {
		return Accepted{}, &route.RejectedError{Reason: "the delivery has no idempotency key"}
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return Accepted{}, &route.RejectedError{Reason: "the run input could not be encoded as JSON"}
	}
	if err := validate(d.Entry.Schema, raw); err != nil {
		return Accepted{}, err
	}

	dedupeKey := idempotencyKey(r, key)
	keys, startKey := []string{dedupeKey}, dedupeKey
	if r.SignedBodyOnly {
		// The only key a replayer cannot change is the body's; the orchestrator's record (the
		// backstop, when Redis missed or lost the keys) is made under it.
		startKey = bodyKey(r, d.Request.RawBody)
		keys = append(keys, startKey)
	}
	id, storeUp := h.lookup(ctx, keys)
	if id != "" {
		return Accepted{RunID: id, Deduplicated: true}, nil
	}
	orgID, err := h.orgs.Resolve(ctx, r.Organization)
	if errors.Is(err, port.ErrOrganizationNotFound) {
		// The route's organization does not exist (yet): its workflow cannot be found.
		return Accepted{}, fmt.Errorf("route %s: organization %q: %w", r.ID(), r.Organization, port.ErrWorkflowNotFound)
	}
	if err != nil {
		return Accepted{}, err
	}
	trigger, err := json.Marshal(map[string]any{"route": r.ID(), "path": d.Path, "idempotencyKey": key})
	if err != nil {
		return Accepted{}, fmt.Errorf("encode trigger: %w", err)
	}
	// The start travels to the orchestrator as one request under the same 1 MiB limit as any
	// request body: a delivery near the gateway's limit makes an input past it, which no
	// redelivery can fix (so not a 503 a sender would retry forever).
	if n := len(raw) + len(trigger) + len(startKey) + len(r.WorkflowName) + len(orgID) + startRunOverhead; n > MaxStartBytes {
		return Accepted{}, &InputTooLargeError{Size: len(raw), Max: MaxStartBytes - startRunOverhead - len(trigger) - len(startKey) - len(r.WorkflowName) - len(orgID)}
	}
	started, err := h.runs.StartRun(ctx, port.StartRun{
		OrganizationID: orgID, WorkflowName: r.WorkflowName, Input: raw,
		IdempotencyKey: startKey, Trigger: trigger,
	})
	if err != nil {
		return Accepted{}, err
	}
	if storeUp {
		// A store that just failed is not written to: the delivery would wait for it twice.
		h.remember(ctx, keys, started.RunID)
	}
	return Accepted(started), nil
}

// fromRequest runs the route's FromRequest. A route that panics on a delivery has refused it:
// nothing a sender can send may turn into a 500.
func (h DeliverWebhookHandler) fromRequest(ctx context.Context, r route.Route, req route.Request) (input any, err error) {
	defer func() {
		if v := recover(); v != nil {
			h.log.ErrorContext(ctx, "webhook route panicked", "route", r.ID(), "panic", v)
			input, err = nil, &route.RejectedError{Reason: "the route could not read this delivery"}
		}
	}()
	input, err = r.FromRequest(ctx, req)
	if err != nil {
		return nil, asRejection(err)
	}
	return input, nil
}

// idempotencyKey runs the route's IdempotencyKey, with the same guard as fromRequest.
func (h DeliverWebhookHandler) idempotencyKey(ctx context.Context, r route.Route, req route.Request) (key string, err error) {
	defer func() {
		if v := recover(); v != nil {
			h.log.ErrorContext(ctx, "webhook route panicked", "route", r.ID(), "panic", v)
			key, err = "", &route.RejectedError{Reason: "the route could not read this delivery"}
		}
	}()
	key, err = r.IdempotencyKey(req)
	if err != nil {
		return "", asRejection(err)
	}
	return key, nil
}

// asRejection keeps a route's typed errors and makes any other error a rejection.
func asRejection(err error) error {
	var (
		sig *route.SignatureError
		rej *route.RejectedError
	)
	if errors.As(err, &sig) || errors.As(err, &rej) {
		return err
	}
	return &route.RejectedError{Reason: err.Error()}
}

// lookup returns the run the store names for any of keys ("" when none) and whether the store
// answered.
func (h DeliverWebhookHandler) lookup(ctx context.Context, keys []string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	id, err := h.keys.Get(ctx, keys...)
	if err != nil {
		// The orchestrator's record still dedupes: go on without the fast path.
		h.log.WarnContext(ctx, "idempotency store unavailable; asking the orchestrator", "err", err)
		return "", false
	}
	return id, true
}

func (h DeliverWebhookHandler) remember(ctx context.Context, keys []string, runID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	stored, err := h.keys.Remember(ctx, keys, runID, KeyTTL)
	switch {
	case err != nil:
		h.log.WarnContext(ctx, "idempotency store unavailable; key not remembered", "err", err)
	case stored != runID:
		// Only possible when the orchestrator's record expired while Redis still held the key.
		h.log.WarnContext(ctx, "idempotency store names another run for this key", "stored", stored, "run", runID)
	}
}

// idempotencyKey scopes a route's key to the route: deliveries are deduplicated per route
// (docs/API.md, "Webhooks"), and the orchestrator's keys are per organization, shared with its
// public Idempotency-Key. Long keys are hashed so that the record stays small.
func idempotencyKey(r route.Route, key string) string {
	k := "webhook:" + r.ID() + ":" + key
	if len(k) <= 255 {
		return k
	}
	sum := sha256.Sum256([]byte(key))
	return "webhook:" + r.ID() + ":sha256:" + hex.EncodeToString(sum[:])
}

// bodyKey is the second key of a route whose signature covers the body alone: the SHA-256 of
// the raw body, scoped to the route. Two deliveries with byte-identical bodies within the key's
// lifetime are one delivery.
func bodyKey(r route.Route, rawBody []byte) string {
	sum := sha256.Sum256(rawBody)
	return "webhook:" + r.ID() + ":body-sha256:" + hex.EncodeToString(sum[:])
}

// validate checks raw against schema and reports every failing location.
func validate(schema *jsonschema.Schema, raw []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &InvalidInputError{Issues: []Issue{{Path: "", Message: "input is not valid JSON"}}}
	}
	err = schema.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var issues []Issue
	collect(ve.BasicOutput(), &issues)
	if len(issues) == 0 {
		issues = []Issue{{Path: "", Message: ve.Error()}}
	}
	return &InvalidInputError{Issues: issues}
}

func collect(u *jsonschema.OutputUnit, out *[]Issue) {
	if u == nil {
		return
	}
	if u.Error != nil && len(u.Errors) == 0 {
		*out = append(*out, Issue{Path: u.InstanceLocation, Message: fmt.Sprint(u.Error)})
	}
	for i := range u.Errors {
		collect(&u.Errors[i], out)
	}
}

// MaxStartBytes is the largest start request the orchestrator reads (its internal RPCs'
// body limit, libs/web.MaxRPCBodyBytes); startRunOverhead bounds the request's own encoding.
// A delivery within the gateway's 1 MiB always fits; a route whose FromRequest builds a larger
// input than that is refused, for good, with 413.
const (
	MaxStartBytes    = web.MaxRPCBodyBytes
	startRunOverhead = 1 << 10
)

// InputTooLargeError is a run input too large to start a run with.
type InputTooLargeError struct{ Size, Max int }

func (e *InputTooLargeError) Error() string {
	return fmt.Sprintf("the run input built from this delivery is %d bytes; a run takes at most %d", e.Size, e.Max)
}

// Issue is one way the run input fails the route's schema: a JSON Pointer into the input.
type Issue struct{ Path, Message string }

// InvalidInputError is a run input that does not satisfy the route's InputSchema.
type InvalidInputError struct{ Issues []Issue }

func (e *InvalidInputError) Error() string {
	if len(e.Issues) == 0 {
		return "input does not match the route's schema"
	}
	return "input does not match the route's schema: " + e.Issues[0].Path + ": " + e.Issues[0].Message
}
