// Package app holds run-orchestrator's use cases: dispatching a run (public route and internal
// RPC alike), reading runs and their logs, cancel and signals. It declares the ports it drives:
// the editor's workflow snapshots, the engine that owns every write, and the read side.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// WorkflowRef names a workflow by id or, for webhook routes, by name.
type WorkflowRef struct {
	ID   string
	Name string
}

// Snapshot is a workflow's definition at one version, as the editor returns it.
type Snapshot struct {
	ID               string
	Version          int64
	Definition       json.RawMessage
	ValidationErrors []run.ValidationError
}

// WorkflowCatalog reads workflow snapshots (editor.v1). A missing workflow is
// run.ErrWorkflowNotFound; any other error means the editor could not answer.
type WorkflowCatalog interface {
	Workflow(ctx context.Context, org string, ref WorkflowRef) (Snapshot, error)
}

// Engine owns every write to runs: dispatch in one transaction, cancel, signals.
type Engine interface {
	// DispatchMany stores runs, their idempotency records (keys[i] for runs[i]; "" for none;
	// the set pairs distinct) and their first jobs in one transaction (or, for a run that can
	// end there, its whole run: the engine's choice). It returns per run the
	// run holding its key: runs[i].ID when stored, else the run of a concurrent start that
	// took the key first. On error nothing was stored.
	DispatchMany(ctx context.Context, runs []run.NewRun, keys []string) ([]string, error)
	// RunsForKeys returns, per (orgs[i], keys[i]), the run the unexpired key names, or "".
	RunsForKeys(ctx context.Context, orgs, keys []string) ([]string, error)
	Cancel(ctx context.Context, org, id string) (run.Status, error)
	Signal(ctx context.Context, org, runID, name string, payload json.RawMessage) (run.SignalResult, error)
}

// PageBytes is the byte budget of a page of runs or of a run's logs: a page stops at the item
// that would take it past this (always holding at least one), and says where to go on. A run
// holds up to a 1 MiB input and its output, and a run's logs every attempt's resolved input and
// output, so a page bounded by count alone (500 runs, 1000 attempts) could be hundreds of MB,
// built in this shared process for one tenant's request.
const PageBytes = 1 << 20

// RunPage is a page of runs and whether runs follow it.
type RunPage struct {
	Runs []run.Record
	More bool
}

// RunReader is the read side of runs and their attempts. Pages are bounded in count and in
// bytes (maxBytes, as the items' JSON; the first item always comes, whatever its size), and
// the reader never holds more than the page and one item.
type RunReader interface {
	Get(ctx context.Context, org, id string) (run.Record, error)
	// List lists org's runs newest first under f: at most f.Limit, no more than fit in maxBytes.
	List(ctx context.Context, org string, f run.ListFilter, maxBytes int64) (RunPage, error)
	// Logs lists the run's attempts with seq > after in seq order, at most limit, no more than
	// fit in maxBytes; run.ErrNotFound when org has no such run.
	Logs(ctx context.Context, org, runID string, after int64, limit int, maxBytes int64) ([]run.Attempt, error)
	// WaitingForWorker is why the queued run id of org waits for a worker: its job's place in
	// the queue (nil when it has no job waiting). It reads only the queue, not the run.
	WaitingForWorker(ctx context.Context, org, id string) (*run.Queued, error)
}

// DispatchError is a failure before the run was durably stored: 500 dispatch_failed.
type DispatchError struct {
	Message string
	Err     error
}

func (e *DispatchError) Error() string { return fmt.Sprintf("dispatch: %s: %v", e.Message, e.Err) }
func (e *DispatchError) Unwrap() error { return e.Err }

// CancelError is an engine failure while cancelling: 500 cancel_failed.
type CancelError struct{ Err error }

func (e *CancelError) Error() string { return fmt.Sprintf("cancel: %v", e.Err) }
func (e *CancelError) Unwrap() error { return e.Err }

// isDomain reports whether err is an answer for the caller rather than a failure.
func isDomain(err error) bool {
	var fe *run.FinishedError
	return errors.Is(err, run.ErrNotFound) || errors.As(err, &fe)
}
