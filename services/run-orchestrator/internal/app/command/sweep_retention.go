package command

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"svc.dev/services/run-orchestrator/internal/app/port"
)

// SweepRetentionHandler deletes the finished runs past their retention period, in batches,
// until none is left or its time budget is spent (the next sweep goes on from there). Every
// replica runs it; concurrent sweeps take different runs.
type SweepRetentionHandler struct {
	store   port.RetentionStore
	cfg     SweepConfig
	deleted metric.Int64Counter
	batches metric.Int64Counter
	pause   func(ctx context.Context, d time.Duration) // waits d or until ctx ends
}

// SweepConfig paces a sweep.
type SweepConfig struct {
	// Server is SVC_RUN_RETENTION.
	Server time.Duration
	// Batch is how many runs of each kind one transaction deletes at most.
	Batch int
	// Budget is how long one sweep goes on while it still finds full batches (the interval
	// between sweeps, so that sweeps never pile up).
	Budget time.Duration
	// Rate is the most runs a second the sweep deletes (SVC_RETENTION_SWEEP_RATE): after a
	// batch it pauses until its runs fit in that rate, so that a backlog (a lowered period,
	// months of history) is worked off at a pace the database serves beside the live path,
	// not as fast as one connection can delete. Zero: no pause.
	Rate int
	// Meter records svc_retention_runs_deleted_total and svc_retention_batches_total; nil
	// records nothing.
	Meter metric.MeterProvider
}

// SweepResult is what one sweep did.
type SweepResult struct {
	Deleted, Batches int
	// Definitions is how many stored definitions went with the last runs that named them.
	Definitions int
	// CaughtUp says the last batch was not full: no run was past its period when it ran.
	CaughtUp bool
	Took     time.Duration
}

// NewSweepRetentionHandler returns the handler over store.
func NewSweepRetentionHandler(store port.RetentionStore, cfg SweepConfig) (SweepRetentionHandler, error) {
	if store == nil {
		panic("nil store")
	}
	if cfg.Server <= 0 || cfg.Batch <= 0 || cfg.Budget <= 0 || cfg.Rate < 0 {
		return SweepRetentionHandler{}, fmt.Errorf("retention sweep: period, batch and budget must be positive and the rate not negative, got %s, %d, %s, %d",
			cfg.Server, cfg.Batch, cfg.Budget, cfg.Rate)
	}
	mp := cfg.Meter
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("svc.dev/services/run-orchestrator")
	deleted, err := m.Int64Counter("svc_retention_runs_deleted_total",
		metric.WithDescription("Finished runs deleted because they were past their retention period, with everything that belonged to them."))
	if err != nil {
		return SweepRetentionHandler{}, err
	}
	batches, err := m.Int64Counter("svc_retention_batches_total",
		metric.WithDescription("Batches the retention sweep ran: each deletes up to the batch size of runs past the server's period and as many past their organization's own."))
	if err != nil {
		return SweepRetentionHandler{}, err
	}
	// Listed from the start, before the first sweep.
	deleted.Add(context.Background(), 0)
	batches.Add(context.Background(), 0)
	return SweepRetentionHandler{store: store, cfg: cfg, deleted: deleted, batches: batches, pause: sleep}, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// rest is how long to pause after a batch of n runs that took took, for the sweep to stay
// within its rate.
func (h SweepRetentionHandler) rest(n int, took time.Duration) time.Duration {
	if h.cfg.Rate <= 0 || n <= 0 {
		return 0
	}
	return max(0, time.Duration(n)*time.Second/time.Duration(h.cfg.Rate)-took)
}

// Handle runs one sweep. On an error it returns what it did before it.
func (h SweepRetentionHandler) Handle(ctx context.Context) (SweepResult, error) {
	start := time.Now()
	var res SweepResult
	for {
		began := time.Now()
		n, err := h.store.DeleteExpired(ctx, h.cfg.Server, h.cfg.Batch)
		res.Deleted += n
		res.Batches++
		h.deleted.Add(ctx, int64(n))
		h.batches.Add(ctx, 1)
		res.Took = time.Since(start)
		if err != nil {
			return res, port.StoreError(err)
		}
		if n < h.cfg.Batch || res.Took >= h.cfg.Budget || ctx.Err() != nil {
			res.CaughtUp = n < h.cfg.Batch
			break
		}
		if d := min(h.rest(n, time.Since(began)), h.cfg.Budget-res.Took); d > 0 {
			h.pause(ctx, d)
			res.Took = time.Since(start)
			if res.Took >= h.cfg.Budget || ctx.Err() != nil {
				break
			}
		}
	}
	if res.Deleted > 0 && ctx.Err() == nil {
		d, err := h.store.DeleteUnusedDefinitions(ctx)
		res.Definitions = d
		res.Took = time.Since(start)
		if err != nil {
			return res, port.StoreError(err)
		}
	}
	return res, ctx.Err()
}
