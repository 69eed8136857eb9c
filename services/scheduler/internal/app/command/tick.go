package command

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"svc.dev/services/scheduler/internal/app/port"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// TickConfig sizes a tick's transactions and its parallelism.
type TickConfig struct {
	// ClaimBatch is how many due schedules one claim transaction takes.
	ClaimBatch int
	// ClaimWorkers is how many claim transactions run at once.
	ClaimWorkers int
	// DispatchBatch is how many pending fires one dispatch transaction locks.
	DispatchBatch int
	// DispatchWorkers is how many dispatch transactions run at once.
	DispatchWorkers int
	// CallBatch is how many fires one call to the Dispatcher (one StartRuns) carries.
	CallBatch int
	// Concurrency is how many Dispatcher calls one dispatch transaction has in flight.
	Concurrency int
	// Meter records svc_schedule_fires_total and svc_schedule_fire_lateness_seconds (nil:
	// not recorded).
	Meter metric.MeterProvider
}

// DefaultTickConfig is what the service runs with: 4 dispatch transactions of up to 400 fires,
// each sending them in 2 StartRuns calls of up to 200 at once (8 calls in flight).
func DefaultTickConfig() TickConfig {
	return TickConfig{ClaimBatch: 250, ClaimWorkers: 3, DispatchBatch: 400, DispatchWorkers: 4, CallBatch: 200, Concurrency: 2}
}

// TickResult is what one tick did: how many (schedule, cutoff) it claimed, and the outcome of
// every dispatch it attempted, this tick's claims and earlier ticks' leftovers alike.
type TickResult struct {
	Claimed int
	// ClaimedBy is Claimed per organization: an answer tells an organization its own count
	// only, never how busy the others are.
	ClaimedBy map[string]int
	Fired     []schedule.Outcome
	Failed    []schedule.Outcome
}

// TickHandler fires what is due: it claims due schedules of every organization in batches,
// then dispatches the pending fires, while it claims, through the Dispatcher.
type TickHandler struct {
	queue      schedule.FireQueue
	dispatcher port.Dispatcher
	cfg        TickConfig
	now        func() time.Time
	log        *slog.Logger
	metrics    fireMetrics
}

// NewTickHandler returns the handler.
func NewTickHandler(queue schedule.FireQueue, dispatcher port.Dispatcher, cfg TickConfig, now func() time.Time, log *slog.Logger) TickHandler {
	if queue == nil || dispatcher == nil || now == nil || log == nil {
		panic("nil dependency")
	}
	if cfg.ClaimBatch < 1 || cfg.ClaimWorkers < 1 || cfg.DispatchBatch < 1 || cfg.DispatchWorkers < 1 || cfg.CallBatch < 1 || cfg.Concurrency < 1 {
		panic("tick config: every size must be positive")
	}
	if cfg.CallBatch > MaxCallBatch {
		panic(fmt.Sprintf("tick config: CallBatch is at most %d", MaxCallBatch))
	}
	return TickHandler{queue: queue, dispatcher: dispatcher, cfg: cfg, now: now, log: log, metrics: newFireMetrics(cfg.Meter)}
}

// Handle runs one tick. Every fire this tick claims is attempted once in it; a fire whose
// dispatch fails stays pending and waits for a later tick (RetryDelay). A failure of the store
// ends the tick with an error; what it committed until then stands.
func (h TickHandler) Handle(ctx context.Context) (TickResult, error) {
	now := h.now()
	var (
		mu  sync.Mutex
		res = TickResult{ClaimedBy: map[string]int{}}
		wg  sync.WaitGroup
	)
	claimed := make(chan struct{}, 1) // a nudge: new pending fires exist
	claimDone := make(chan struct{})
	began := time.Now()
	claimErrs := make([]error, h.cfg.ClaimWorkers)
	var claimers sync.WaitGroup
	for c := range h.cfg.ClaimWorkers {
		claimers.Go(func() {
			for {
				fires, err := h.queue.ClaimDue(ctx, now, h.cfg.ClaimBatch)
				if err != nil {
					claimErrs[c] = err
					return
				}
				if len(fires) == 0 {
					return
				}
				mu.Lock()
				res.Claimed += len(fires)
				for _, f := range fires {
					res.ClaimedBy[f.OrganizationID]++
				}
				mu.Unlock()
				select {
				case claimed <- struct{}{}:
				default:
				}
			}
		})
	}
	go func() {
		claimers.Wait()
		h.log.DebugContext(ctx, "tick: claims done", "ms", time.Since(began).Milliseconds())
		close(claimDone)
	}()
	errs := make([]error, h.cfg.DispatchWorkers)
	for w := range h.cfg.DispatchWorkers {
		wg.Go(func() {
			finished := false
			for {
				n, err := h.queue.DispatchPending(ctx, now, h.cfg.DispatchBatch, func(ctx context.Context, fires []schedule.Fire) []schedule.Outcome {
					out := h.dispatch(ctx, fires)
					h.metrics.record(ctx, out, h.now())
					mu.Lock()
					for _, o := range out {
						if o.Dispatched() {
							res.Fired = append(res.Fired, o)
						} else {
							res.Failed = append(res.Failed, o)
						}
					}
					mu.Unlock()
					return out
				})
				if err != nil {
					errs[w] = err
					return
				}
				if n > 0 {
					continue
				}
				if finished {
					return
				}
				select {
				case <-claimDone:
					finished = true // one more pass takes the claims that landed since the empty batch
				case <-claimed:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	<-claimDone
	for _, err := range append(claimErrs, errs...) {
		if err != nil {
			return res, fmt.Errorf("tick: %w", err)
		}
	}
	if n := len(res.Failed); res.Claimed > 0 || n > 0 {
		h.log.InfoContext(ctx, "tick", "claimed", res.Claimed, "fired", len(res.Fired), "failed", n, "ms", time.Since(began).Milliseconds())
	}
	return res, nil
}

// MaxCallBatch is the most fires one Dispatcher call may carry (orchestrator.v1 StartRuns).
const MaxCallBatch = 500

// dispatch starts the runs of fires in calls of CallBatch fires, Concurrency calls at a time.
// A call that fails leaves each of its fires pending (dispatch_failed: retried by a later tick).
func (h TickHandler) dispatch(ctx context.Context, fires []schedule.Fire) []schedule.Outcome {
	out := make([]schedule.Outcome, len(fires))
	sem := make(chan struct{}, h.cfg.Concurrency)
	var wg sync.WaitGroup
	for lo := 0; lo < len(fires); lo += h.cfg.CallBatch {
		batch := fires[lo:min(lo+h.cfg.CallBatch, len(fires))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got, err := h.dispatcher.Dispatch(ctx, batch)
			if err == nil && len(got) != len(batch) {
				err = fmt.Errorf("dispatcher answered %d outcomes for %d fires", len(got), len(batch))
			}
			if err != nil {
				h.log.WarnContext(ctx, "dispatch failed; the fires stay in the outbox", "fires", len(batch),
					"first_schedule_id", batch[0].ScheduleID, "cutoff", batch[0].Cutoff, "err", err)
				got = make([]schedule.Outcome, len(batch))
				for i := range got {
					got[i] = schedule.Outcome{Code: schedule.CodeDispatchFailed, Message: "the orchestrator could not be reached; a later tick retries"}
				}
			}
			for i, f := range batch {
				o := got[i]
				o.Fire = f
				out[lo+i] = o
			}
		})
	}
	wg.Wait()
	return out
}

// The outcomes of a fire's dispatch, as svc_schedule_fires_total counts them: its run started
// (or found started by an earlier attempt), failed for good (the workflow is gone or refuses
// the start), or left in the outbox for a later tick.
const (
	fireFired   = "fired"
	fireFailed  = "failed"
	fireRetried = "retried"
)

// fireMetrics are the tick's instruments.
type fireMetrics struct {
	fires    metric.Int64Counter
	lateness metric.Float64Histogram
}

func newFireMetrics(mp metric.MeterProvider) fireMetrics {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("svc.dev/services/scheduler")
	fires, err := m.Int64Counter("svc_schedule_fires_total",
		metric.WithDescription("Schedule fires dispatched, by outcome: fired (the run started), failed (no run, for good: the workflow is gone or refused the start), retried (the orchestrator could not be reached; a later tick tries again)."),
		metric.WithUnit("{fire}"))
	if err != nil {
		panic(fmt.Sprintf("fires counter: %v", err)) // only for an invalid name
	}
	lateness, err := m.Float64Histogram("svc_schedule_fire_lateness_seconds",
		metric.WithDescription("How late a fire started its run: the dispatch's answer minus the fire's due time (the schedule's latest fire time at or before the tick; missed fires coalesce into it)."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600))
	if err != nil {
		panic(fmt.Sprintf("fire lateness histogram: %v", err))
	}
	for _, o := range []string{fireFired, fireFailed, fireRetried} {
		fires.Add(context.Background(), 0, metric.WithAttributes(attribute.String("outcome", o)))
	}
	return fireMetrics{fires: fires, lateness: lateness}
}

// record counts the outcomes of one dispatch, answered at now.
func (m fireMetrics) record(ctx context.Context, out []schedule.Outcome, now time.Time) {
	var fired, failed, retried int64
	for _, o := range out {
		switch {
		case o.Dispatched():
			fired++
			m.lateness.Record(ctx, max(now.Sub(o.Fire.Cutoff), 0).Seconds())
		case o.Retry():
			retried++
		default:
			failed++
		}
	}
	for outcome, n := range map[string]int64{fireFired: fired, fireFailed: failed, fireRetried: retried} {
		if n > 0 {
			m.fires.Add(ctx, n, metric.WithAttributes(attribute.String("outcome", outcome)))
		}
	}
}
