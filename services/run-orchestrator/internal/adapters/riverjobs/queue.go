// Package riverjobs is the engine's job queue on River: the one job kind (drive a run as far
// as it goes), the worker that drives it, and the queue's writes in a run's own transaction
// (jobs that continue a run, cancel, completion). River's tables live in the orchestrator
// schema beside the run store's, so a job and the run's writes commit together.
package riverjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"svc.dev/libs/pgdb"
	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/adapters/executors"
	"svc.dev/services/run-orchestrator/internal/adapters/runstore"
	"svc.dev/services/run-orchestrator/internal/domain/fairshare"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Config tunes the queue.
type Config struct {
	// Replica is River's client id, so river_job.attempted_by names the replica that holds a
	// running job (the sweep reads it).
	Replica string
	// Workers is how many runs this replica drives at once (default 100).
	Workers int
	// OrgCeiling is how many of them may drive one organization's runs (0: all but one in
	// twenty of Workers, at least one spare; the rest stay free for other organizations).
	OrgCeiling int
	// Tracer and Propagator trace the runs' steps (nil: not traced).
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// Queue is the River client and the worker that drives runs.
type Queue struct {
	client    *river.Client[pgx.Tx]
	log       *slog.Logger
	store     *runstore.Store
	executors map[string]executors.Executor
	catalog   map[string]connectors.Entry
	params    *executors.ParamsValidator
	fair      *fairshare.Clock
	turns     *turns
	ceiling   *ceiling
	// heavy holds a token per evaluation over the inline budget (prepare) and per write of a
	// huge result (heavyWrite) in progress.
	heavy      chan struct{}
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator

	mu sync.Mutex
	// running holds, per run, the cancel of each job driving it here (by job id: parallel
	// blocks of one run may run in several jobs).
	running map[string]map[int64]context.CancelCauseFunc

	stopping chan struct{} // closed when Stop begins: workers hand runs back between steps
	stopOnce sync.Once
}

// runArgs is the one job kind: drive run RunID as far as it goes. Trace carries the W3C trace
// context of what inserted the job (the dispatching request, a signal, the step before), so
// the run's steps join that trace.
type runArgs struct {
	RunID string            `json:"run_id"`
	Trace map[string]string `json:"trace,omitempty"`
	// Org is the run's organization: the turns between steps compare organizations.
	Org string `json:"org,omitempty"`
	// Due marks a job queued for a time of its own rather than tagged by the fair share clock:
	// its scheduled_at is a wall-clock time, which says nothing of where the queue's head is.
	Due bool `json:"due,omitempty"`
}

// Kind is the runtime workflow's name.
func (runArgs) Kind() string { return run.Spec }

// InsertOpts keeps a crash from ever discarding a run (ARCHITECTURE §4: at least 2).
func (runArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 25} }

// New migrates River's tables into the orchestrator schema (under an advisory lock, as goose
// migrations are) and builds the queue. Bind gives it the run store before Start.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config, catalog []connectors.Entry, execs map[string]executors.Executor,
	log *slog.Logger,
) (*Queue, error) {
	if err := migrate(ctx, pool, log); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	tp := cfg.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	q := &Queue{
		log: log, executors: execs, catalog: map[string]connectors.Entry{}, fair: fairshare.NewClock(0, 0),
		tracer: tp.Tracer("svc.dev/services/run-orchestrator/engine"), propagator: cfg.Propagator,
		running: map[string]map[int64]context.CancelCauseFunc{}, stopping: make(chan struct{}),
	}
	q.turns = &turns{pool: pool, clock: q.fair}
	q.heavy = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	q.ceiling = newCeiling(OrgCeiling(cfg.Workers, cfg.OrgCeiling))
	for _, entry := range catalog {
		q.catalog[entry.Type] = entry
	}
	var err error
	if q.params, err = executors.NewParamsValidator(catalog); err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{q: q}); err != nil {
		return nil, err
	}
	q.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            runstore.Schema,
		ID:                cfg.Replica,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		Middleware:        []rivertype.Middleware{river.JobInsertMiddlewareFunc(availableWhenTagged)},
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		JobTimeout:        -1,
		// Runs, attempts and their history are the run store's tables; a finished job row is
		// only a spent queue entry. Kept long, they bloat the table every fetch and sweep reads.
		CompletedJobRetentionPeriod: 5 * time.Minute,
		Logger:                      log.With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return q, nil
}

// OrgCeiling is the ceiling on one organization's workers of a replica of workers: ceiling
// when it is set, else all but one in twenty of them (at least one spare when there are two
// or more): an organization alone keeps 95 % of the workers, and a step that takes minutes
// cannot take the last ones from everyone else.
func OrgCeiling(workers, ceiling int) int {
	if ceiling > 0 {
		return min(ceiling, workers)
	}
	if workers < 2 {
		return workers
	}
	return workers - max(1, workers/20)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate river: acquire: %w", err)
	}
	defer conn.Release()
	lock := pgdb.LockID("migrate:" + runstore.Schema + ":river")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return fmt.Errorf("migrate river: lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock) }()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: runstore.Schema, Logger: log})
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	for _, v := range res.Versions {
		log.InfoContext(ctx, "river migration applied", "schema", runstore.Schema, "version", v.Version)
	}
	return nil
}

// Bind gives the queue the run store its worker drives runs through (the store writes jobs
// through the queue: each needs the other). Call it once, before Start.
func (q *Queue) Bind(store *runstore.Store) {
	if store == nil || q.store != nil {
		panic("riverjobs: Bind needs a store, once")
	}
	q.store = store
}

// Start begins working jobs.
func (q *Queue) Start(ctx context.Context) error {
	if q.store == nil {
		panic("riverjobs: Start before Bind")
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	return nil
}

// Stop stops fetching new jobs; steps in flight finish and commit, and their workers hand the
// runs back (a fresh job) instead of going on to the next block; a retry backoff in progress
// is handed back at once, scheduled for its end. It returns when the workers are done or ctx
// ends. Stop may be called more than once.
func (q *Queue) Stop(ctx context.Context) error {
	first := false
	q.stopOnce.Do(func() { first = true; close(q.stopping) })
	if !first {
		return nil
	}
	err := q.client.Stop(ctx)
	q.turns.close()
	return err
}

// Stopping is closed when Stop begins: from then on runs are handed back between steps.
func (q *Queue) Stopping() <-chan struct{} { return q.stopping }

func (q *Queue) isStopping() bool {
	select {
	case <-q.stopping:
		return true
	default:
		return false
	}
}

// CancelLocal cancels the context of every job of this replica driving the run (its step in
// flight ends at once; the run's cancel has recorded it).
func (q *Queue) CancelLocal(runID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range q.running[runID] {
		c(errors.New("run cancelled"))
	}
}

// ---- the queue's writes in a run's transaction (runstore.Jobs) ------------------------------

// Insert queues the jobs in ctx's trace. Due now (at is zero), each job is tagged by the fair
// share clock, and its tag is its scheduled_at: River takes available jobs in that order, so
// organizations take turns at the workers. Due later (a run handed back until its retry's
// backoff ends), a job waits for at itself and then queues behind the tagged work.
func (q *Queue) Insert(ctx context.Context, tx pgx.Tx, jobs []runstore.NewJob, at time.Time) error {
	params := make([]river.InsertManyParams, len(jobs))
	if !at.IsZero() {
		for i, j := range jobs {
			a := q.args(ctx, j)
			a.Due = true
			params[i] = river.InsertManyParams{Args: a, InsertOpts: &river.InsertOpts{ScheduledAt: at}}
		}
	} else {
		now := time.Now()
		tags := q.tags(jobs, now)
		for i, j := range jobs {
			params[i] = river.InsertManyParams{Args: q.args(ctx, j), InsertOpts: &river.InsertOpts{ScheduledAt: tags[i]}}
		}
	}
	_, err := q.client.InsertManyTx(ctx, tx, params)
	return err
}

// availableWhenTagged makes a tagged job available at once. River inserts every job given a
// ScheduledAt as scheduled, for its scheduler to make available once the time has come (it
// looks every few seconds); a tag is never in the future, so the job may be taken now, in its
// tag's place in the queue. River then also wakes the workers of the queue, as for any job
// inserted available.
func availableWhenTagged(ctx context.Context, jobs []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	now := time.Now()
	for _, j := range jobs {
		if a, ok := j.Args.(runArgs); ok && !a.Due && j.State == rivertype.JobStateScheduled && j.ScheduledAt != nil && !j.ScheduledAt.After(now) {
			j.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}

// tags is the fair share tag of each job, each organization's jobs in the order given.
func (q *Queue) tags(jobs []runstore.NewJob, now time.Time) []time.Time {
	out := make([]time.Time, len(jobs))
	if len(jobs) == 1 || allOneOrg(jobs) {
		copy(out, q.fair.Tags(jobs[0].Org, len(jobs), now))
		return out
	}
	count := map[string]int{}
	for _, j := range jobs {
		count[j.Org]++
	}
	byOrg := make(map[string][]time.Time, len(count))
	for org, n := range count {
		byOrg[org] = q.fair.Tags(org, n, now)
	}
	for i, j := range jobs {
		out[i] = byOrg[j.Org][0]
		byOrg[j.Org] = byOrg[j.Org][1:]
	}
	return out
}

func allOneOrg(jobs []runstore.NewJob) bool {
	for _, j := range jobs[1:] {
		if j.Org != jobs[0].Org {
			return false
		}
	}
	return true
}

// args is job j's arguments, in ctx's trace.
func (q *Queue) args(ctx context.Context, j runstore.NewJob) runArgs {
	a := runArgs{RunID: j.RunID, Org: j.Org}
	if q.propagator != nil && trace.SpanContextFromContext(ctx).IsValid() {
		a.Trace = map[string]string{}
		q.propagator.Inject(ctx, propagation.MapCarrier(a.Trace))
	}
	return a
}

// CancelAll cancels every job of the run that has not finished.
func (q *Queue) CancelAll(ctx context.Context, tx pgx.Tx, runID string) error {
	// args @> uses River's GIN index on args (args->>'run_id' would read the whole table).
	rows, err := tx.Query(ctx, `SELECT id FROM river_job WHERE kind = $1 AND args @> jsonb_build_object('run_id', $2::text)
		AND state NOT IN ('completed', 'cancelled', 'discarded')`, run.Spec, runID)
	if err != nil {
		return fmt.Errorf("find jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if _, err := q.client.JobCancelTx(ctx, tx, j); err != nil && !errors.Is(err, river.ErrNotFound) {
			return fmt.Errorf("cancel job %d: %w", j, err)
		}
	}
	return nil
}

// Complete marks the acting job completed inside tx.
func (q *Queue) Complete(ctx context.Context, tx pgx.Tx, job *runstore.Job) error {
	rj, ok := job.Handle.(*river.Job[runArgs])
	if !ok {
		return fmt.Errorf("complete job %d: not a job of this queue", job.ID)
	}
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, rj)
	return err
}
