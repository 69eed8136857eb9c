package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Runs finished at their dispatch. A run whose blocks all run in process with no effect but
// their result, and few enough of them, is run to its end in memory before its dispatch
// transaction, exactly as its first job would run it inline; that transaction then stores the
// run as it ended (attempts, blocks, status log, output) instead of queueing a job for it.
// Such a run costs one transaction instead of four (dispatch, the queue's fetch, the step,
// the job's completion). Anything a job would have to carry on (an attempt that is not inline
// or failed, a wait, a retry, parallel blocks) sends the run the usual way, with a job, and
// what was run in memory is forgotten.

// FinishAtDispatch runs the new run r (queued, in memory) to its end when every block of it
// may finish at its dispatch (connectors.Runtime.AtDispatch; no more than MaxInline of them), in a span of the dispatch's trace. It returns the outcome that ends the
// run and done, which the caller calls once with whether the dispatch committed (log lines
// are written then); ok false leaves r to a job.
func (e *Engine) FinishAtDispatch(ctx context.Context, r *run.Run) (o run.Outcome, done func(committed bool), ok bool) {
	if len(r.Def.Blocks) > MaxInline {
		return o, nil, false
	}
	for _, b := range r.Def.Blocks {
		if !e.atDispatch[b.Type] {
			return o, nil, false
		}
	}
	ctx, span := e.tracer.Start(ctx, "svc-runtime run at dispatch", trace.WithAttributes(attribute.String("run.id", r.ID)))
	logs := &connectors.DeferredLogs{}
	done = func(committed bool) {
		if committed {
			logs.Write()
		} else {
			logs.Drop()
			span.SetAttributes(attribute.Bool("run.stored", false))
		}
		span.End()
	}
	job := &Job{RunID: r.ID, Try: 1}
	o, err := e.interp.Apply(r, run.Advance{JobEvent: run.JobEvent{Try: 1}, Now: time.Now()})
	for n := 0; err == nil && n < MaxInline && o.Fusable(); n++ {
		next, ok := e.runInline(logs.Defer(ctx), job, *o.Start)
		if !ok {
			break
		}
		var more run.Outcome
		if more, err = e.interp.Apply(r, next); err == nil {
			o.Then(more)
		}
	}
	if err != nil || !r.Status.Terminal() || o.Start != nil || o.Retry != nil || o.NewJobs > 0 || o.CancelJobs ||
		len(o.Armed) > 0 || o.Consume != nil {
		done(false)
		return run.Outcome{}, nil, false
	}
	return o, done, true
}
