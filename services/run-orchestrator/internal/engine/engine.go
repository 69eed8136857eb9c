// Package engine is the durable runtime svc-runtime (ARCHITECTURE §4): River jobs in the
// orchestrator schema lease runs across replicas, and the run interpreter walks each run's
// pinned graph. An attempt row is committed before its connector runs; a result and the next
// step commit together; the worker that holds a run goes straight on to the next ready block
// without a queue hop. Waits complete the job and leave a row in waits, released by an
// in-process timer (rebuilt from the table at start and polled every second) or by a signal.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Schema is where River's tables and ours live.
const Schema = "orchestrator"

// Config tunes the engine.
type Config struct {
	// Replica names this process in step_attempts.replica.
	Replica string
	// Workers is how many runs this replica drives at once.
	Workers int
	HTTP    HTTPConfig
	// Tracer and Propagator trace the runs' steps (nil: not traced).
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
	// Heartbeat is how often the replica refreshes its row in replicas (default 1 s);
	// DeadAfter how old a heartbeat makes a replica dead (default 5 s); SweepEvery how often
	// the replica looks for dead replicas' work (default: Heartbeat).
	Heartbeat, DeadAfter, SweepEvery time.Duration
	// Events receives every committed change of a run, after its commit (nil: dropped).
	Events Publisher
}

// Publisher is the feed of run changes: Publish gets the changes of one commit, in order,
// once the commit has succeeded. It must not block.
type Publisher interface {
	Publish(changes []run.Change)
}

type noPublisher struct{}

func (noPublisher) Publish([]run.Change) {}

// Engine drives runs.
type Engine struct {
	pool       *pgxpool.Pool
	river      *river.Client[pgx.Tx]
	log        *slog.Logger
	cfg        Config
	executors  map[string]Executor
	catalog    map[string]connectors.Entry
	interp     *run.Interpreter
	events     Publisher
	timers     *timers
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator

	mu sync.Mutex
	// running holds, per run, the cancel of each job driving it here (by job id: parallel
	// blocks of one run may run in several jobs).
	running map[string]map[int64]context.CancelCauseFunc

	stopping chan struct{} // closed when Stop begins: workers hand runs back between steps
	stopOnce sync.Once
	bgCancel context.CancelFunc
	bgDone   chan struct{}
}

// runArgs is the one job kind: drive run RunID as far as it goes. Trace carries the W3C trace
// context of what inserted the job (the dispatching request, a signal, the step before), so
// the run's steps join that trace.
type runArgs struct {
	RunID string            `json:"run_id"`
	Trace map[string]string `json:"trace,omitempty"`
}

// args is the job that continues runID, in ctx's trace.
func (e *Engine) args(ctx context.Context, runID string) runArgs {
	a := runArgs{RunID: runID}
	if e.propagator != nil && trace.SpanContextFromContext(ctx).IsValid() {
		a.Trace = map[string]string{}
		e.propagator.Inject(ctx, propagation.MapCarrier(a.Trace))
	}
	return a
}

// Kind is the runtime workflow's name.
func (runArgs) Kind() string { return run.Spec }

// InsertOpts keeps a crash from ever discarding a run (ARCHITECTURE §4: at least 2).
func (runArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 25} }

type worker struct {
	river.WorkerDefaults[runArgs]
	e *Engine
}

// Timeout is off: steps carry their own timeouts, and a run may take long.
func (w *worker) Timeout(*river.Job[runArgs]) time.Duration { return -1 }

// Work drives the run. No run is left behind by a job that keeps failing: a panic is an
// error like any other, and when the last of the job's tries fails too, the run is failed
// with the error recorded (failJob) rather than left waiting for a job River has discarded.
func (w *worker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	err := w.e.driveSafely(ctx, job)
	if err == nil || job.Attempt < job.MaxAttempts || ctx.Err() != nil {
		return err
	}
	w.e.log.Error("run job failed its last try; failing the run", "run_id", job.Args.RunID, "job_id", job.ID, "attempt", job.Attempt, "err", err)
	if ferr := w.e.failJob(context.WithoutCancel(ctx), job, fmt.Errorf("the engine could not go on with this run after %d tries: %w", job.Attempt, err)); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

// NextRetry spaces a failing job's tries 1 s, 2 s, 4 s ... up to a minute apart (River's
// default grows as attempt⁴ seconds, days apart by the last tries): a run whose job fails
// for a passing reason (its database restarting) goes on soon after, and one that keeps
// failing is failed within about 20 minutes.
func (w *worker) NextRetry(job *river.Job[runArgs]) time.Time {
	return time.Now().Add(jobRetryDelay(job.Attempt))
}

// New migrates River's tables into the orchestrator schema (under an advisory lock, as goose
// migrations are) and builds the engine. It does not start working; Start does.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config, log *slog.Logger) (*Engine, error) {
	if err := migrateRiver(ctx, pool, log); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = DefaultDeadAfter
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = cfg.Heartbeat
	}
	if cfg.Replica == "" || len(cfg.Replica) > 100 {
		return nil, fmt.Errorf("engine: replica id must be 1 to 100 characters, got %q", cfg.Replica)
	}
	entries, err := connectors.Load()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		pool: pool, log: log, cfg: cfg, executors: Executors(log, cfg.HTTP),
		catalog: map[string]connectors.Entry{}, events: cfg.Events,
		running:  map[string]map[int64]context.CancelCauseFunc{},
		stopping: make(chan struct{}), bgDone: make(chan struct{}),
	}
	if e.events == nil {
		e.events = noPublisher{}
	}
	tp := cfg.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	e.tracer, e.propagator = tp.Tracer("svc.dev/services/run-orchestrator/engine"), cfg.Propagator
	rules := map[string]run.Connector{}
	for _, entry := range entries {
		e.catalog[entry.Type] = entry
		rules[entry.Type] = connectorRules(entry, cfg.HTTP)
	}
	e.interp = run.NewInterpreter(rules, run.NewTemplates(), func() string { return wire.NewID(wire.Attempt) })
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{e: e}); err != nil {
		return nil, err
	}
	e.river, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: Schema,
		// River's client id is the replica id, so river_job.attempted_by names the replica
		// that holds a running job (the sweeper reads it).
		ID:                cfg.Replica,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		JobTimeout:        -1,
		// Runs, attempts and their history are our own tables; a finished job row is only a
		// spent queue entry. Kept long, they bloat the table every fetch and sweep reads.
		CompletedJobRetentionPeriod: 5 * time.Minute,
		Logger:                      log.With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	e.timers = newTimers(e)
	return e, nil
}

func migrateRiver(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate river: acquire: %w", err)
	}
	defer conn.Release()
	lock := pgdb.LockID("migrate:" + Schema + ":river")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return fmt.Errorf("migrate river: lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock) }()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema, Logger: log})
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	for _, v := range res.Versions {
		log.InfoContext(ctx, "river migration applied", "schema", Schema, "version", v.Version)
	}
	return nil
}

// connectorRules is what the interpreter needs of a catalog entry: its retry policy, its
// x-expression params (kept raw: the connector evaluates them) and the hidden params the
// server's configuration sets.
func connectorRules(entry connectors.Entry, http HTTPConfig) run.Connector {
	p := entry.RetryPolicy
	c := run.Connector{
		Retry: run.RetryPolicy{MaxAttempts: p.MaxAttempts, InitialIntervalMS: p.InitialIntervalMS,
			BackoffCoefficient: p.BackoffCoefficient, MaxIntervalMS: p.MaxIntervalMS},
		Raw: expressionParams(entry),
	}
	if entry.Type == "http.request" && http.AllowPrivate {
		c.Extra = map[string]any{"allow_private_network": true}
	}
	return c
}

func expressionParams(e connectors.Entry) map[string]bool {
	var s struct {
		Properties map[string]struct {
			Expr bool `json:"x-expression"`
		} `json:"properties"`
	}
	out := map[string]bool{}
	if json.Unmarshal(e.Params, &s) == nil {
		for k, p := range s.Properties {
			if p.Expr {
				out[k] = true
			}
		}
	}
	return out
}

// Start registers the replica (before it fetches any job, so its jobs are never taken for a
// dead replica's), starts the heartbeat and the sweeper, begins working jobs and arms the
// wait timers.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.heartbeat(ctx); err != nil {
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.bgCancel = cancel
	go func() {
		defer close(e.bgDone)
		e.background(bg)
	}()
	if err := e.river.Start(ctx); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	e.timers.start(ctx)
	return nil
}

// Replica is this process's replica id.
func (e *Engine) Replica() string { return e.cfg.Replica }

// Stop stops fetching new jobs; steps in flight finish and commit, and their workers hand the
// runs back (a fresh job) instead of going on to the next block; a retry backoff in progress
// is handed back at once, scheduled for its end. Then the replica deregisters: should a step
// outlast ctx, its attempt is marked lost by another replica's sweeper and the run continues
// there. Stop may be called more than once.
func (e *Engine) Stop(ctx context.Context) error {
	first := false
	e.stopOnce.Do(func() { first = true; close(e.stopping) })
	if !first {
		return nil
	}
	e.timers.stop()
	err := e.river.Stop(ctx)
	if e.bgCancel != nil {
		e.bgCancel()
		<-e.bgDone
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return errors.Join(err, e.deregister(dctx))
}

// Stopping is closed when Stop begins: from then on runs are handed back between steps.
func (e *Engine) Stopping() <-chan struct{} { return e.stopping }

func (e *Engine) isStopping() bool {
	select {
	case <-e.stopping:
		return true
	default:
		return false
	}
}
