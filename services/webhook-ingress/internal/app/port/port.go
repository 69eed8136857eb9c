// Package port declares what webhook-ingress's use case needs from its peers: run-orchestrator,
// which starts runs; the store of idempotency keys (Redis), the fast path for redeliveries; and
// identity, which turns a route's organization into an id. The errors they answer are here too.
package port

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// StartRun asks the orchestrator for a run.
type StartRun struct {
	OrganizationID string
	WorkflowName   string
	Input          json.RawMessage
	// IdempotencyKey makes the orchestrator answer a repeated start with the first run's id.
	IdempotencyKey string
	// Trigger holds the members of the run's trigger object besides kind ("webhook").
	Trigger json.RawMessage
}

// Started names the run a StartRun made or found.
type Started struct {
	RunID        string
	Deduplicated bool
}

// Dispatcher starts runs (run-orchestrator's StartRun). It returns ErrWorkflowNotFound,
// a *DispatchRejectedError, or an *UnavailableError when the orchestrator could not answer.
type Dispatcher interface {
	StartRun(ctx context.Context, cmd StartRun) (Started, error)
}

// KeyStore remembers which run an idempotency key started (Redis): the fast path for
// redeliveries. It is not the guarantee: the orchestrator's idempotency record is.
type KeyStore interface {
	// Get returns the run id stored for the first of keys that has one, or "", in one round
	// trip.
	Get(ctx context.Context, keys ...string) (string, error)
	// Remember stores each of keys → runID for ttl unless that key is already set (SET NX), in
	// one round trip, and returns the run id the store holds for keys[0] afterwards.
	Remember(ctx context.Context, keys []string, runID string, ttl time.Duration) (string, error)
}

// Organizations turns a route's organization (slug or id) into an organization id (identity's
// LookupOrganization). It returns ErrOrganizationNotFound when there is none, and an
// *UnavailableError when identity could not answer.
type Organizations interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// ErrWorkflowNotFound: the route's organization has no workflow of the route's name (or the
// organization does not exist).
var ErrWorkflowNotFound = errors.New("workflow not found")

// ErrOrganizationNotFound: no organization has this slug or id.
var ErrOrganizationNotFound = errors.New("organization not found")

// DispatchRejectedError is the orchestrator refusing the run: code is "workflow_invalid" or
// "invalid_body".
type DispatchRejectedError struct{ Code, Message string }

func (e *DispatchRejectedError) Error() string { return "run rejected: " + e.Code + ": " + e.Message }

// UnavailableError is a peer that could not answer; nothing was started and a redelivery may
// succeed.
type UnavailableError struct {
	Peer string
	Err  error
}

func (e *UnavailableError) Error() string { return e.Peer + " unavailable: " + e.Err.Error() }

func (e *UnavailableError) Unwrap() error { return e.Err }
