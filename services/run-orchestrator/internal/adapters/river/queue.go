package river

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"svc.dev/services/run-orchestrator/internal/app/engine"
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
}

// Queue is the River client whose workers take jobs and hand their runs to the engine.
type Queue struct {
	client  *river.Client[pgx.Tx]
	jobs    *Jobs
	engine  *engine.Engine
	ceiling *ceiling
	log     *slog.Logger
}

// New builds the queue's workers on jobs' tables; Start begins working.
func New(pool *pgxpool.Pool, cfg Config, jobs *Jobs, eng *engine.Engine, log *slog.Logger) (*Queue, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	q := &Queue{jobs: jobs, engine: eng, ceiling: newCeiling(OrgCeiling(cfg.Workers, cfg.OrgCeiling)), log: log}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{q: q}); err != nil {
		return nil, err
	}
	var err error
	q.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            jobs.schema,
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

// Start begins working jobs.
func (q *Queue) Start(ctx context.Context) error {
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	return nil
}

// Stop stops fetching new jobs; the engine (stopped first) hands the runs of the steps in
// flight back once they commit. It returns when the workers are done or ctx ends. Stop may
// be called more than once.
func (q *Queue) Stop(ctx context.Context) error {
	q.engine.Stop()
	return q.client.Stop(ctx)
}
