package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// What the engine counts (docs/METRICS.md). Everything is recorded in process, from what the
// engine already holds: the outcome of a commit (its changes say which runs ended, which
// attempts ended and how, which retries were scheduled), the clock around a connector's call,
// the job's times. No step costs a query more.

// otherType labels an attempt of a block type the connector catalog does not list, so the
// type label keeps to the catalog's fixed set.
const otherType = "other"

// attemptOutcomes are the attempt endings counted; a cancelled attempt is the run's cancel,
// counted there.
var attemptOutcomes = []string{"succeeded", "failed", "lost"} //nolint:gochecknoglobals // fixed label set

// finishStatuses are the terminal statuses of a run.
var finishStatuses = []run.Status{run.StatusCompleted, run.StatusFailed, run.StatusCancelled} //nolint:gochecknoglobals // fixed label set

// metrics are the engine's instruments. A nil meter provider records nothing.
//
// The label sets are made once, here: a measurement given attributes one by one builds and
// sorts a set of its own on every call, which on a step of a few hundred microseconds is a
// cost worth not paying.
type metrics struct {
	types map[string]bool // the catalog's block types

	byType        map[string]metric.MeasurementOption    // {type}, otherType included
	byTypeOutcome map[[2]string]metric.MeasurementOption // {type, outcome}
	byStatus      map[run.Status]metric.MeasurementOption

	finished        metric.Int64Counter
	attempts        metric.Int64Counter
	attemptDuration metric.Float64Histogram
	scheduleToStart metric.Float64Histogram
	lost            metric.Int64Counter
	retries         metric.Int64Counter
	timerLateness   metric.Float64Histogram
}

// secondsBuckets are the bounds of the engine's histograms: from a millisecond (a step that
// went straight on) to ten minutes (a queue far behind, a long connector call).
var secondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600} //nolint:gochecknoglobals // constant bounds

func newMetrics(mp metric.MeterProvider, types []string) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("svc.dev/services/run-orchestrator/engine")
	x := &metrics{types: map[string]bool{}, byType: map[string]metric.MeasurementOption{},
		byTypeOutcome: map[[2]string]metric.MeasurementOption{}, byStatus: map[run.Status]metric.MeasurementOption{}}
	for _, t := range append(slices.Clone(types), otherType) {
		x.types[t] = t != otherType
		x.byType[t] = metric.WithAttributeSet(attribute.NewSet(attribute.String("type", t)))
		for _, o := range attemptOutcomes {
			x.byTypeOutcome[[2]string{t, o}] = metric.WithAttributeSet(attribute.NewSet(attribute.String("type", t), attribute.String("outcome", o)))
		}
	}
	for _, s := range finishStatuses {
		x.byStatus[s] = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", string(s))))
	}
	var err error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		if e != nil && err == nil {
			err = fmt.Errorf("metric %s: %w", name, e)
		}
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, e := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...))
		if e != nil && err == nil {
			err = fmt.Errorf("metric %s: %w", name, e)
		}
		return h
	}
	x.finished = counter("svc_runs_finished_total",
		"Runs that ended, by terminal status (completed, failed, cancelled), counted when the commit that ended them succeeded.", "{run}")
	x.attempts = counter("svc_attempts_total",
		"Step attempts that ended, by block type and outcome (succeeded, failed, lost), counted when their end was committed.", "{attempt}")
	x.lost = counter("svc_attempts_lost_total",
		"Step attempts recorded lost because the replica running them stopped heartbeating (the sweep of a dead replica's runs).", "{attempt}")
	x.retries = counter("svc_retries_scheduled_total",
		"Retries scheduled after a failed attempt, by block type, under the connector's retry policy.", "{retry}")
	x.attemptDuration = seconds("svc_attempt_duration_seconds",
		"Time a connector took to run one attempt, by block type: from the call to its result, outside any transaction (inline blocks included).")
	x.scheduleToStart = seconds("svc_attempt_schedule_to_start_seconds",
		"Time from work becoming ready to a worker starting it: a queued job from its ready time to its worker taking it, a step a worker goes straight on to from the previous commit, a retry from its backoff's end.")
	x.timerLateness = seconds("svc_timer_lateness_seconds",
		"How late a due sleep or signal timeout was released: the commit of the wake minus the wait's due time.")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	for _, s := range finishStatuses {
		x.finished.Add(ctx, 0, x.byStatus[s])
	}
	x.lost.Add(ctx, 0)
	for t, known := range x.types {
		if !known {
			continue
		}
		for _, o := range attemptOutcomes {
			x.attempts.Add(ctx, 0, x.byTypeOutcome[[2]string{t, o}])
		}
		x.retries.Add(ctx, 0, x.byType[t])
	}
	return x, nil
}

// blockType is the type label of block id of r: its type when the catalog lists it, else
// otherType (a run that cannot be read has no definition).
func (x *metrics) blockType(r *run.Run, id string) string {
	if r != nil {
		if b, ok := r.Def.Block(id); ok && x.types[b.Type] {
			return b.Type
		}
	}
	return otherType
}

func (x *metrics) typeLabel(t string) string {
	if x.types[t] {
		return t
	}
	return otherType
}

// committed records what a committed outcome of run r changed: runs ended, attempts ended,
// retries scheduled. r may be nil (nothing of it is known but its changes).
func (x *metrics) committed(ctx context.Context, r *run.Run, o *run.Outcome) {
	for i := range o.Changes {
		c := &o.Changes[i]
		switch c.Kind {
		case run.ChangeStatus:
			if c.Status.Terminal() {
				x.finished.Add(ctx, 1, x.byStatus[c.Status])
			}
		case run.ChangeAttemptFinished:
			if !slices.Contains(attemptOutcomes, c.AttemptStatus) {
				continue
			}
			x.attempts.Add(ctx, 1, x.byTypeOutcome[[2]string{x.blockType(r, c.BlockID), c.AttemptStatus}])
			if c.AttemptStatus == "lost" {
				x.lost.Add(ctx, 1)
			}
		case run.ChangeRetryScheduled:
			x.retries.Add(ctx, 1, x.byType[x.blockType(r, c.BlockID)])
		}
	}
}

// took records connector calls whose results committed, each with its span as exemplar.
func (x *metrics) took(calls ...timed) {
	for _, c := range calls {
		ctx := trace.ContextWithSpanContext(context.Background(), c.span)
		x.attemptDuration.Record(ctx, c.took.Seconds(), x.byType[x.typeLabel(c.typ)])
	}
}

// started records work a worker starts that has been ready since ready (zero: not recorded).
func (x *metrics) started(ctx context.Context, ready time.Time) {
	if ready.IsZero() {
		return
	}
	x.scheduleToStart.Record(ctx, max(time.Since(ready), 0).Seconds())
}

// woke records a wait released d after its due time.
func (x *metrics) woke(ctx context.Context, d time.Duration) {
	x.timerLateness.Record(ctx, max(d, 0).Seconds())
}
