// Package river is the engine's job queue on River: the one job kind (drive a run as far
// as it goes), the queue's writes in a run's own transaction (jobs that continue a run,
// cancel, completion, Jobs) and the workers that hand each job's run to the engine (Queue).
// River's tables live in the orchestrator schema beside the runs', so a job and the run's
// writes commit together.
package river

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/fairshare"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Jobs is the queue's side of a run's transaction (engine.Jobs) and the turns between steps
// (engine.Turns): it inserts, cancels and completes jobs inside the run's transaction, tags
// new jobs with the fair share clock, and reads the queue's head for the turns. Its River
// client is also the one whose workers take the jobs (Queue): a job inserted by the client
// that works the queue wakes a worker at once, where another client's insert would wait for
// the next fetch poll.
type Jobs struct {
	client     *river.Client[pgx.Tx]
	schema     string
	fair       *fairshare.Clock
	turns      *turns
	propagator propagation.TextMapPropagator
	// queue is the workers' side, made whole by New (its engine) before the client starts.
	queue *Queue
}

// NewJobs migrates River's tables into cfg.Schema (under an advisory lock, as goose migrations
// are) and builds the River client: the queue's write side, and the workers New hands to the
// engine. cfg.Propagator (nil: none) carries each inserting transaction's trace into its jobs.
func NewJobs(ctx context.Context, pool *pgxpool.Pool, cfg Config, log *slog.Logger) (*Jobs, error) {
	if err := migrate(ctx, pool, cfg.Schema, log); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	j := &Jobs{schema: cfg.Schema, fair: fairshare.NewClock(0, 0), propagator: cfg.Propagator}
	j.turns = &turns{pool: pool, clock: j.fair}
	busy, err := workerGauges(cfg.Meter, cfg.Workers)
	if err != nil {
		return nil, err
	}
	j.queue = &Queue{jobs: j, ceiling: newCeiling(OrgCeiling(cfg.Workers, cfg.OrgCeiling)), log: log, busy: busy}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{q: j.queue}); err != nil {
		return nil, err
	}
	j.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            cfg.Schema,
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
		// Every job's args hold keys no other job has (its run id, its trace), and a GIN index
		// never drops a key whose rows are gone: only a rebuild does. River's reindexer
		// rebuilds its indexes concurrently, by default once a day; at the queue's churn the
		// args index would grow all day long while the table's live rows stay level.
		ReindexerSchedule: river.PeriodicInterval(reindexEvery),
		Logger:            log.With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return j, nil
}

// reindexEvery is how often River rebuilds its job table's indexes: the finished jobs' keys
// pile up in the GIN indexes until a rebuild, so the indexes hold at most about the jobs of
// two retention periods (CompletedJobRetentionPeriod) instead of a day's.
const reindexEvery = 5 * time.Minute

// Yield reports whether a worker driving a run of org hands it back rather than go on (turns).
func (j *Jobs) Yield(ctx context.Context, org string) bool { return j.turns.yield(ctx, org) }

// Close releases the turns' connection.
func (j *Jobs) Close() { j.turns.close() }

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

// InsertOpts keeps a crash from ever discarding a run (at least 2).
func (runArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 25} }

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

func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate river: acquire: %w", err)
	}
	defer conn.Release()
	lock := pgdb.LockID("migrate:" + schema + ":river")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return fmt.Errorf("migrate river: lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock) }()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: log})
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	for _, v := range res.Versions {
		log.InfoContext(ctx, "river migration applied", "schema", schema, "version", v.Version)
	}
	return nil
}

// ---- the queue's writes in a run's transaction (engine.Jobs) ------------------------------

// Insert queues the jobs in ctx's trace. Due now (at is zero), each job is tagged by the fair
// share clock, and its tag is its scheduled_at: River takes available jobs in that order, so
// organizations take turns at the workers. Due later (a run handed back until its retry's
// backoff ends), a job waits for at itself and then queues behind the tagged work.
func (q *Jobs) Insert(ctx context.Context, tx pgx.Tx, jobs []engine.NewJob, at time.Time) error {
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
func (q *Jobs) tags(jobs []engine.NewJob, now time.Time) []time.Time {
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

func allOneOrg(jobs []engine.NewJob) bool {
	for _, j := range jobs[1:] {
		if j.Org != jobs[0].Org {
			return false
		}
	}
	return true
}

// args is job j's arguments, in ctx's trace.
func (q *Jobs) args(ctx context.Context, j engine.NewJob) runArgs {
	a := runArgs{RunID: j.RunID, Org: j.Org}
	if q.propagator != nil && trace.SpanContextFromContext(ctx).IsValid() {
		a.Trace = map[string]string{}
		q.propagator.Inject(ctx, propagation.MapCarrier(a.Trace))
	}
	return a
}

// CancelAll cancels every job of the run that has not finished.
func (q *Jobs) CancelAll(ctx context.Context, tx pgx.Tx, runID string) error {
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
func (q *Jobs) Complete(ctx context.Context, tx pgx.Tx, job *engine.Job) error {
	rj, ok := job.Handle.(*river.Job[runArgs])
	if !ok {
		return fmt.Errorf("complete job %d: not a job of this queue", job.ID)
	}
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, rj)
	return err
}
