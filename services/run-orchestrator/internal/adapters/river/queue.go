package river

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
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
	// Meter records svc_workers_busy and svc_workers_max (nil: not recorded).
	Meter metric.MeterProvider
}

// Queue is the workers of jobs' River client: each takes a job and hands its run to the
// engine.
type Queue struct {
	jobs    *Jobs
	engine  *engine.Engine
	ceiling *ceiling
	log     *slog.Logger
	// busy is svc_workers_busy: the jobs this replica's workers hold.
	busy metric.Int64UpDownCounter

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

// workerGauges builds svc_workers_busy and records svc_workers_max (workers) on mp.
func workerGauges(mp metric.MeterProvider, workers int) (metric.Int64UpDownCounter, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("svc.dev/services/run-orchestrator/river")
	busy, err := m.Int64UpDownCounter("svc_workers_busy",
		metric.WithDescription("Jobs this replica's workers hold now (each drives a run, or waits for its organization's ceiling)."),
		metric.WithUnit("{worker}"))
	if err != nil {
		return nil, fmt.Errorf("svc_workers_busy: %w", err)
	}
	busy.Add(context.Background(), 0)
	most, err := m.Int64Gauge("svc_workers_max",
		metric.WithDescription("Jobs this replica's workers may hold at once (SVC_ORCHESTRATOR_WORKERS)."),
		metric.WithUnit("{worker}"))
	if err != nil {
		return nil, fmt.Errorf("svc_workers_max: %w", err)
	}
	most.Record(context.Background(), int64(workers))
	return busy, nil
}
