// Package engine drives runs: a job's worker hands it a run, and it applies the interpreter's
// decisions one transaction at a time through the run repository, runs inline what may run
// inline, hands the other attempts to their connectors' executors, and goes on until the run
// finishes, waits, or other workers hold its remaining blocks. docs/ARCHITECTURE.md walks
// through it.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Job is the queue job a worker drives a run in. Handle is the queue's own value for it, and
// Cache the repository's memory of the run between the job's transactions (nil at first).
type Job struct {
	ID     int64
	RunID  string
	Org    string
	Try    int
	Handle any
	Cache  any
	// Ready is when the job's work became ready to run (its due time, or its insertion for a
	// job due at once); zero when unknown. The worker's start is measured from it.
	Ready time.Time
}

// NewJob is a job to queue: one that continues run RunID of organization Org (the queue
// shares its workers fairly across organizations).
type NewJob struct {
	RunID, Org string
}

// RunTx is a run locked in its transaction, as an UpdateFunc sees it.
type RunTx interface {
	// Run is the locked run, read at its current revision.
	Run() *run.Run
	// Status is the run's status as locked (a run that cannot be read has one too).
	Status() run.Status
	// Broken is why the stored run cannot be read, or nil; Run then holds only its identity
	// and status.
	Broken() error
	// BufferedSignal is the oldest signal named name stored for the run and not consumed yet,
	// locked until the commit; nil when there is none.
	BufferedSignal(ctx context.Context, name string) (*run.Signal, error)
	// StoreSignal stores a signal sent to the run.
	StoreSignal(ctx context.Context, id, name string, payload json.RawMessage) error
	// Fail ends a run that cannot go on (it cannot be read, or its job keeps failing) without
	// the interpreter: attempts still running end, one more failed attempt carries cause, and
	// the run ends with status (failed, or cancelled when a cancel ends it). A terminal run is
	// left as it is.
	Fail(ctx context.Context, cause error, status run.Status) (run.Outcome, error)
}

// UpdateFunc decides, in the run's transaction, what happens to the locked run.
type UpdateFunc func(ctx context.Context, tx RunTx) (run.Outcome, error)

// LostFunc decides, in the sweep's transaction, what becomes of run r whose attempts lost and
// jobs deadJobs died with their replica.
type LostFunc func(r *run.Run, lost []run.LostAttempt, deadJobs []int64) (run.Outcome, error)

// RunRepository stores runs. Update is one transaction on run runID: lock it (with a job, fenced
// off when the job no longer holds it: fn is not called and nothing is written), call fn,
// write its outcome (the run's rows, its jobs), commit, then publish the run's changes and arm
// the timers of waits due soon. It records the outcome even when ctx is cancelled. The run
// gone is run.ErrNotFound.
type RunRepository interface {
	Update(ctx context.Context, runID string, job *Job, fn UpdateFunc) (run.Outcome, error)
	// FailJob fails the run of job with cause and completes the job, unless the job no longer
	// holds the run or the run has already ended; it returns what it committed.
	FailJob(ctx context.Context, job *Job, cause error) (run.Outcome, error)
	// CompleteJob completes a job whose run is gone.
	CompleteJob(ctx context.Context, job *Job) error
	// DispatchMany stores new runs, their idempotency records (keys[i] for runs[i]; "" for
	// none) and their first jobs in one transaction; a run with ended[i] set is stored as it
	// ended, with no job. It returns per run the run holding its key: runs[i].ID when stored,
	// else the run of a concurrent start that took the key first. On error nothing was stored.
	DispatchMany(ctx context.Context, runs []run.NewRun, keys []string, ended []*Ended) ([]string, error)
	// RunsForKeys returns, per (orgs[i], keys[i]), the run the unexpired key names, or "".
	RunsForKeys(ctx context.Context, orgs, keys []string) ([]string, error)
	// Sweep recovers the runs of replicas without a heartbeat for deadAfter, each in the
	// sweep's transaction as lost decides, and returns how many attempts were lost.
	Sweep(ctx context.Context, deadAfter time.Duration, lost LostFunc) (int, error)
}

// Jobs is the job queue, written in the run's own transaction (the queue's tables share the
// database): Insert queues the jobs (repeat a run for more), due at at (zero: now); CancelAll
// cancels every unfinished job of a run; Complete completes the acting job.
type Jobs interface {
	Insert(ctx context.Context, tx pgx.Tx, jobs []NewJob, at time.Time) error
	CancelAll(ctx context.Context, tx pgx.Tx, runID string) error
	Complete(ctx context.Context, tx pgx.Tx, job *Job) error
}

// Publisher is the feed of run changes: Publish gets the changes of one commit, in order, once
// the commit has succeeded. It must not block.
type Publisher interface {
	Publish(changes []run.Change)
}

// Timers arms in-process timers for waits due soon (a wait's end wakes the run).
type Timers interface {
	Arm(runID, blockID string, at time.Time)
}

// Turns says whether a worker hands its run back between two steps: Yield is true when
// another organization's work is queued ahead of org's next turn.
type Turns interface {
	Yield(ctx context.Context, org string) bool
}

// Ended is a new run the engine ran to its end at its dispatch, and the outcome that ended it.
type Ended struct {
	Run     *run.Run
	Outcome run.Outcome
}

// BrokenRunError is a stored run that cannot be read: retrying its job cannot help (the
// engine fails the run instead).
type BrokenRunError struct{ Err error }

func (e *BrokenRunError) Error() string { return "run cannot be read: " + e.Err.Error() }
func (e *BrokenRunError) Unwrap() error { return e.Err }

// MaxInline bounds the inline attempts one transaction carries, so a long chain of them still
// commits (and shows its progress) every few blocks.
const MaxInline = 16

// Config is what the engine is built from.
type Config struct {
	Runs        RunRepository
	Turns       Turns
	Interpreter *run.Interpreter
	Catalog     []connectors.Entry
	// Connectors are the connectors' runtimes, and ConnectorConfig the server's configuration
	// their executors are built with.
	Connectors      []connectors.Runtime
	ConnectorConfig connectors.Config
	// Tracer traces the runs' steps (nil: not traced).
	Tracer trace.TracerProvider
	// Meter records the engine's metrics (nil: not recorded; docs/METRICS.md).
	Meter metric.MeterProvider
	Log   *slog.Logger
}

// Engine drives runs.
type Engine struct {
	runs      RunRepository
	turns     Turns
	interp    *run.Interpreter
	executors map[string]connectors.Executor
	// inline and atDispatch are the connectors that run inline, and those that may finish a
	// run at its dispatch (connectors.Runtime).
	inline, atDispatch map[string]bool
	catalog            map[string]connectors.Entry
	params             *ParamsValidator
	tracer             trace.Tracer
	metrics            *metrics
	log                *slog.Logger
	// heavy holds a token per evaluation over the inline budget (prepare) and per write of a
	// huge result (heavyWrite) in progress.
	heavy chan struct{}

	mu sync.Mutex
	// running holds, per run, the cancel of each job driving it here (by job id: parallel
	// blocks of one run may run in several jobs).
	running map[string]map[int64]context.CancelCauseFunc

	stopping chan struct{} // closed by Stop: runs are handed back between steps
	stopOnce sync.Once
}

// New builds the engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Runs == nil || cfg.Turns == nil || cfg.Interpreter == nil || len(cfg.Connectors) == 0 || cfg.Log == nil {
		return nil, errors.New("engine: New needs a run repository, turns, an interpreter, connectors and a logger")
	}
	tp := cfg.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	e := &Engine{
		runs: cfg.Runs, turns: cfg.Turns, interp: cfg.Interpreter, log: cfg.Log,
		executors: map[string]connectors.Executor{}, inline: map[string]bool{}, atDispatch: map[string]bool{},
		catalog: map[string]connectors.Entry{}, tracer: tp.Tracer("svc.dev/services/run-orchestrator/engine"),
		heavy:   make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		running: map[string]map[int64]context.CancelCauseFunc{}, stopping: make(chan struct{}),
	}
	for _, entry := range cfg.Catalog {
		e.catalog[entry.Type] = entry
	}
	for _, c := range cfg.Connectors {
		e.executors[c.Type] = c.New(cfg.ConnectorConfig)
		e.inline[c.Type] = c.Inline
		e.atDispatch[c.Type] = c.AtDispatch
	}
	var err error
	if e.params, err = NewParamsValidator(cfg.Catalog); err != nil {
		return nil, err
	}
	types := make([]string, 0, len(cfg.Catalog))
	for _, entry := range cfg.Catalog {
		types = append(types, entry.Type)
	}
	if e.metrics, err = newMetrics(cfg.Meter, types); err != nil {
		return nil, err
	}
	return e, nil
}

// Stop makes the workers hand their runs back between steps (a retry backoff in progress is
// handed back at once, due at its end). It may be called more than once.
func (e *Engine) Stop() { e.stopOnce.Do(func() { close(e.stopping) }) }

// Stopping is closed when Stop is called.
func (e *Engine) Stopping() <-chan struct{} { return e.stopping }

func (e *Engine) isStopping() bool {
	select {
	case <-e.stopping:
		return true
	default:
		return false
	}
}

// CancelLocal cancels the context of every job of this replica driving the run (its step in
// flight ends at once; the run's cancel has recorded it).
func (e *Engine) CancelLocal(runID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.running[runID] {
		c(errors.New("run cancelled"))
	}
}

// update is RunRepository.Update, with what the commit did recorded once it has committed.
func (e *Engine) update(ctx context.Context, runID string, job *Job, fn UpdateFunc) (run.Outcome, error) {
	var r *run.Run
	o, err := e.runs.Update(ctx, runID, job, func(ctx context.Context, tx RunTx) (run.Outcome, error) {
		r = tx.Run()
		return fn(ctx, tx)
	})
	if err == nil {
		e.metrics.committed(ctx, r, &o)
	}
	return o, err
}

// track registers the cancel of job's context while it drives its run; the returned func
// forgets it.
func (e *Engine) track(job *Job, cancel context.CancelCauseFunc) (untrack func()) {
	e.mu.Lock()
	if e.running[job.RunID] == nil {
		e.running[job.RunID] = map[int64]context.CancelCauseFunc{}
	}
	e.running[job.RunID][job.ID] = cancel
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.running[job.RunID], job.ID)
		if len(e.running[job.RunID]) == 0 {
			delete(e.running, job.RunID)
		}
		e.mu.Unlock()
	}
}
