package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The gauges of the whole system's backlog, read from the database (docs/METRICS.md): the
// runs waiting on a signal, a sleep or a worker, the jobs ready and not taken, the age of the
// oldest of them. A scrape never costs the database more than one reading per
// BacklogEvery: the reading is kept and served again until then, and concurrent scrapes
// share one. A reading is one statement whose every part stops at a bound.

// BacklogEvery is the most often the backlog is read from the database.
const BacklogEvery = 5 * time.Second

// The bounds of one reading: the ready jobs counted (an index-only walk of River's fetch
// index), the head of the queue read for the runs it holds and its oldest job, and the runs
// counted per wait kind (an index-only walk of waits_kind_run_idx). A gauge at its bound
// means at least that many.
const (
	backlogDepthBound = 100_000
	backlogHeadBound  = 10_000
	backlogWaitBound  = 100_000
)

// readyJobs are River's jobs that a worker may take now: available, and those due whose
// move to available River's scheduler has not made yet.
const readyJobs = `state IN ('available', 'scheduled', 'retryable') AND queue = 'default' AND scheduled_at <= now()`

// backlogQuery reads the backlog in one statement. The head is the available jobs in River's
// own fetch order (priority, scheduled_at, id: the order of its fetch index, so no sort),
// which is the order workers take them in. A job due at once carries a fair share tag as its
// scheduled_at (adapters/river), so it is ready since its insertion; any other job since its
// scheduled_at.
const backlogQuery = `WITH head AS (
	SELECT args->>'run_id' AS run_id,
	       CASE WHEN attempt = 0 AND NOT args ? 'due' THEN created_at ELSE scheduled_at END AS ready_at
	FROM river_job WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
	ORDER BY priority, scheduled_at, id LIMIT $2)
SELECT
	(SELECT count(*) FROM (SELECT 1 FROM river_job WHERE ` + readyJobs + ` LIMIT $1) d),
	(SELECT count(DISTINCT run_id) FROM head),
	coalesce((SELECT extract(epoch FROM now() - min(ready_at))::float8 FROM head), 0),
	(SELECT count(*) FROM (SELECT DISTINCT run_id FROM waits WHERE kind = 'sleep' LIMIT $3) s),
	(SELECT count(*) FROM (SELECT DISTINCT run_id FROM waits WHERE kind = 'signal' LIMIT $3) s)`

// backlogReading is one reading of the backlog.
type backlogReading struct {
	depth, workerRuns, sleepRuns, signalRuns int64
	oldest                                   float64 // seconds
}

// Backlog serves the backlog gauges from a reading at most BacklogEvery old.
type Backlog struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	reg  metric.Registration

	mu      sync.Mutex
	last    backlogReading
	has     bool
	readAt  time.Time
	timeout time.Duration
}

// NewBacklog registers svc_runs_waiting, svc_queue_depth and svc_queue_oldest_age_seconds on
// mp, read from pool when scraped. Close unregisters them.
func NewBacklog(pool *pgxpool.Pool, mp metric.MeterProvider, log *slog.Logger) (*Backlog, error) {
	if pool == nil || mp == nil || log == nil {
		panic("postgres: NewBacklog needs a pool, a meter provider and a logger")
	}
	b := &Backlog{pool: pool, log: log, timeout: 2 * time.Second}
	m := mp.Meter("svc.dev/services/run-orchestrator/postgres")
	waiting, err := m.Int64ObservableGauge("svc_runs_waiting",
		metric.WithDescription(fmt.Sprintf("Runs of the whole system waiting, by what for: a signal, a sleep (waits in progress), or a worker (runs with a job ready and not taken, among the first %d ready jobs). Read from the database at most every %s; at most %d per kind are counted.",
			backlogHeadBound, BacklogEvery, backlogWaitBound)),
		metric.WithUnit("{run}"))
	if err != nil {
		return nil, fmt.Errorf("svc_runs_waiting: %w", err)
	}
	depth, err := m.Int64ObservableGauge("svc_queue_depth",
		metric.WithDescription(fmt.Sprintf("Jobs of the whole system ready and not taken by a worker. Read from the database at most every %s; at most %d are counted.", BacklogEvery, backlogDepthBound)),
		metric.WithUnit("{job}"))
	if err != nil {
		return nil, fmt.Errorf("svc_queue_depth: %w", err)
	}
	oldest, err := m.Float64ObservableGauge("svc_queue_oldest_age_seconds",
		metric.WithDescription(fmt.Sprintf("Age of the oldest job ready and not taken (0 when none), among the first %d in the queue's order. Read from the database at most every %s.", backlogHeadBound, BacklogEvery)),
		metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("svc_queue_oldest_age_seconds: %w", err)
	}
	b.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		r, ok := b.reading(ctx)
		if !ok {
			return nil // never read yet: no value rather than a false zero
		}
		o.ObserveInt64(waiting, r.signalRuns, metric.WithAttributes(attribute.String("kind", "signal")))
		o.ObserveInt64(waiting, r.sleepRuns, metric.WithAttributes(attribute.String("kind", "sleep")))
		o.ObserveInt64(waiting, r.workerRuns, metric.WithAttributes(attribute.String("kind", "worker")))
		o.ObserveInt64(depth, r.depth)
		o.ObserveFloat64(oldest, r.oldest)
		return nil
	}, waiting, depth, oldest)
	if err != nil {
		return nil, fmt.Errorf("backlog gauges: %w", err)
	}
	return b, nil
}

// Close unregisters the gauges (before the pool closes).
func (b *Backlog) Close() {
	if err := b.reg.Unregister(); err != nil {
		b.log.Warn("backlog gauges: unregister", "err", err)
	}
}

// reading is the last reading when it is fresh, else a new one. A failed read keeps the last
// reading and is not tried again before BacklogEvery: a database in trouble is not asked
// more often because it is. Scrapes that come while a read is in flight wait for it.
func (b *Backlog) reading(ctx context.Context) (backlogReading, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.readAt.IsZero() && time.Since(b.readAt) < BacklogEvery {
		return b.last, b.has
	}
	b.readAt = time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	var r backlogReading
	err := b.pool.QueryRow(ctx, backlogQuery, backlogDepthBound, backlogHeadBound, backlogWaitBound).
		Scan(&r.depth, &r.workerRuns, &r.oldest, &r.sleepRuns, &r.signalRuns)
	if err != nil {
		b.log.WarnContext(ctx, "backlog gauges: read", "err", err)
		return b.last, b.has
	}
	b.last, b.has = r, true
	return r, true
}
