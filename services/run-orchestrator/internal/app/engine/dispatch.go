package engine

import (
	"context"
	"encoding/json"
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

// finishAtDispatch runs the new run nr in memory, as its first job would, when every block of
// it may finish at its dispatch (connectors.Runtime.AtDispatch; no more than MaxInline of
// them), in a span of the dispatch's trace. It returns the run as it ended and done, which the
// caller calls once with whether the dispatch stored it (log lines are written then); nil
// leaves the run to a job. A run of a concurrency group runs only once admitted, which its
// dispatch transaction decides: it never runs before it.
func (e *Engine) finishAtDispatch(ctx context.Context, nr run.NewRun) (*Ended, func(committed bool)) {
	if nr.Group != nil {
		return nil, nil
	}
	var def run.Definition
	if nr.Parsed != nil {
		def = *nr.Parsed // the start parsed it already
	} else {
		var err error
		if def, err = run.ParseDefinition(nr.Definition); err != nil {
			return nil, nil
		}
	}
	if len(def.Blocks) > MaxInline {
		return nil, nil
	}
	for _, b := range def.Blocks {
		if !e.atDispatch[b.Type] {
			return nil, nil
		}
	}
	r := &run.Run{ID: nr.ID, OrganizationID: nr.OrganizationID, WorkflowID: nr.WorkflowID, Status: run.StatusQueued,
		Def: def, State: run.NewState()}
	if json.Unmarshal(nr.Input, &r.Input) != nil {
		return nil, nil
	}
	ctx, span := e.tracer.Start(ctx, "svc-runtime run at dispatch", trace.WithAttributes(attribute.String("run.id", r.ID)))
	logs := &connectors.DeferredLogs{}
	var calls []timed
	done := func(committed bool) {
		if committed {
			e.metrics.took(calls...)
			logs.Write()
		} else {
			logs.Drop()
			span.SetAttributes(attribute.Bool("run.stored", false))
		}
		span.End()
	}
	job := &Job{RunID: r.ID, Try: 1}
	apply := func(ev run.Event) (run.Outcome, error) { return e.interp.Apply(r, ev) }
	o, err := apply(run.Advance{JobEvent: run.JobEvent{Try: 1}, Now: time.Now()})
	if err == nil {
		o, err = e.inlineChain(logs.Defer(ctx), job, o, apply, &calls)
	}
	if err != nil || !r.Status.Terminal() || o.Start != nil || o.Retry != nil || o.NewJobs > 0 || o.CancelJobs ||
		len(o.Armed) > 0 || o.Consume != nil {
		done(false)
		return nil, nil
	}
	return &Ended{Run: r, Outcome: o}, done
}
