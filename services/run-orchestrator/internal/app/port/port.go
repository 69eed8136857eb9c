// Package port declares what run-orchestrator's use cases drive: the editor's workflow
// snapshots, the engine that owns every write to runs, and the read side of runs; and the
// errors the use cases return, which the inbound ports' error tables map to public codes.
package port

import (
	"context"
	"encoding/json"
	"time"

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

// SnapshotReader reads a run and its attempts changed after a sequence, consistently.
type SnapshotReader interface {
	Snapshot(ctx context.Context, org, id string, after int64) (run.Snapshot, error)
}

// Waker says when a run or an organization's runs may have changed.
type Waker interface {
	// WatchRun's channel receives after each notified change of the run; stop ends it.
	WatchRun(runID string) (wake <-chan struct{}, stop func())
	// WatchOrg's channel receives the ids of the organization's runs that changed (it may
	// drop ids when the reader is slow; the stream then re-reads), or "" when the stream
	// should read every change since its last read.
	WatchOrg(org string) (runs <-chan string, stop func())
}

// StatusKey orders the runs' status changes: by when the run took its status, then by run id.
type StatusKey struct {
	At    time.Time
	RunID string
}

// RunStatus is a run as a catch-up read finds it, with when it took its present status
// (runs.status_at: the start of the transaction that set it, on the database's clock).
type RunStatus struct {
	Run run.Record
	At  time.Time
}

// Key is the change's place in the read order.
func (s RunStatus) Key() StatusKey { return StatusKey{At: s.At, RunID: s.Run.ID} }

// OrgStatusReader reads an organization's runs by when they took their present status.
type OrgStatusReader interface {
	// Horizon is a time no status change still to commit can carry: every change a read
	// started after Horizon returned does not see commits with a later time.
	Horizon(ctx context.Context) (time.Time, error)
	// StatusesAfter lists org's runs (of workflowID unless "") whose status key is after
	// after, in key order, at most limit; and the Horizon as it stood before the read.
	// Runs come as a run.status event needs them: no definition, input, output or trigger.
	StatusesAfter(ctx context.Context, org, workflowID string, after StatusKey, limit int) ([]RunStatus, time.Time, error)
	// Status reads one run of org as StatusesAfter does (run.ErrNotFound when org has none).
	Status(ctx context.Context, org, id string) (run.Record, error)
}

// RetentionStore keeps the organizations' own retention periods and deletes the finished runs
// past their period, with everything that belongs to them.
type RetentionStore interface {
	// Override is org's own period and when it was set; 0 and the zero time when it has none.
	Override(ctx context.Context, org string) (time.Duration, time.Time, error)
	// SetOverride stores org's period (0 removes it) and returns when it was set.
	SetOverride(ctx context.Context, org string, period time.Duration) (time.Time, error)
	// DeleteExpired deletes, in one short transaction for each of the two kinds, at most limit
	// finished runs past the server's period and at most limit past their organization's
	// shorter one, skipping runs another sweep holds; it returns how many it deleted.
	DeleteExpired(ctx context.Context, server time.Duration, limit int) (int, error)
	// DeleteUnusedDefinitions removes stored definitions no run names any longer, without
	// ever removing one a dispatch in flight uses; it returns how many it removed.
	DeleteUnusedDefinitions(ctx context.Context) (int, error)
}
