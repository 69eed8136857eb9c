package river

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/propagation"

	"svc.dev/services/run-orchestrator/internal/app/engine"
)

// Config tunes the queue.
type Config struct {
	// Schema is where River's tables live, beside the runs'.
	Schema string
	// Replica is River's client id, so river_job.attempted_by names the replica that holds a
	// running job (the sweep reads it).
	Replica string
	// Workers is how many runs this replica drives at once (default 100).
	Workers int
	// OrgCeiling is how many of them may drive one organization's runs (0: all but one in
	// twenty of Workers, at least one spare; the rest stay free for other organizations).
	OrgCeiling int
	// Propagator carries traces into jobs (nil: none).
	Propagator propagation.TextMapPropagator
}

// Queue is the workers of jobs' River client: each takes a job and hands its run to the
// engine.
type Queue struct {
	jobs    *Jobs
	engine  *engine.Engine
	ceiling *ceiling
	log     *slog.Logger

	stopOnce sync.Once
	stopErr  error
}

// New gives jobs' workers the engine they hand runs to; Start begins working.
func New(jobs *Jobs, eng *engine.Engine) *Queue {
	if jobs == nil || eng == nil || jobs.queue.engine != nil {
		panic("river: New needs jobs and an engine, once")
	}
	jobs.queue.engine = eng
	return jobs.queue
}

// Start begins working jobs.
func (q *Queue) Start(ctx context.Context) error {
	if err := q.jobs.client.Start(ctx); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	return nil
}

// Stop stops fetching new jobs; the engine (stopped first) hands the runs of the steps in
// flight back once they commit. It returns when the workers are done or ctx ends. Stop may
// be called more than once.
func (q *Queue) Stop(ctx context.Context) error {
	q.stopOnce.Do(func() {
		q.engine.Stop()
		q.stopErr = q.jobs.client.Stop(ctx)
	})
	return q.stopErr
}
