package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// A worker holding a run's job drives it: each transaction applies one event to the run
// (the job taking it, an attempt's result, a retry due) and carries the interpreter's
// decisions out. An attempt row is durable before its connector runs; a result and the next
// block's attempt commit together, and the worker goes straight on to that block without a
// queue hop. Blocks that become ready together get a job each, so other workers (on any
// replica) run them in parallel.

// jobEvent is what a job's events say about the job.
func (e *Engine) jobEvent(job *river.Job[runArgs]) run.JobEvent {
	return run.JobEvent{Job: job.ID, Try: job.Attempt, Stopping: e.isStopping()}
}

// apply runs one transaction applying the event that ev builds (in the transaction, on the
// locked run) to the job's run.
func (e *Engine) apply(ctx context.Context, job *river.Job[runArgs], c *runCache, ev func(ctx context.Context, tx pgx.Tx, r *run.Run) (run.Event, error)) (run.Outcome, error) {
	return e.update(ctx, job.Args.RunID, job, c, func(ctx context.Context, tx pgx.Tx, l *locked) (run.Outcome, error) {
		if l.broken != nil {
			return run.Outcome{}, &brokenRunError{l.broken}
		}
		event, err := ev(ctx, tx, l.run)
		if err != nil {
			return run.Outcome{}, err
		}
		return e.interp.Apply(l.run, event)
	})
}

// drive runs the job's run until it finishes, suspends, or other workers hold its remaining
// blocks.
func (e *Engine) drive(ctx context.Context, job *river.Job[runArgs]) (err error) {
	runID := job.Args.RunID
	if e.propagator != nil && len(job.Args.Trace) > 0 {
		ctx = e.propagator.Extract(ctx, propagation.MapCarrier(job.Args.Trace))
	}
	ctx, span := e.tracer.Start(ctx, "svc-runtime drive", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("run.id", runID), attribute.Int64("river.job.id", job.ID), attribute.Int("river.job.attempt", job.Attempt)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	runCtx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	if e.running[runID] == nil {
		e.running[runID] = map[int64]context.CancelCauseFunc{}
	}
	e.running[runID][job.ID] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.running[runID], job.ID)
		if len(e.running[runID]) == 0 {
			delete(e.running, runID)
		}
		e.mu.Unlock()
		cancel(nil)
	}()
	c := newRunCache()
	o, err := e.apply(runCtx, job, c, func(context.Context, pgx.Tx, *run.Run) (run.Event, error) {
		return run.Advance{JobEvent: e.jobEvent(job), Now: time.Now()}, nil
	})
	if errors.Is(err, run.ErrNotFound) {
		// No such run (it cannot be deleted today): the job has nothing to drive.
		return pgx.BeginFunc(context.WithoutCancel(ctx), e.pool, func(tx pgx.Tx) error { return e.complete(ctx, tx, job) })
	}
	for err == nil && o.Start != nil {
		o, err = e.execute(runCtx, job, c, *o.Start)
	}
	if broken := (*brokenRunError)(nil); errors.As(err, &broken) {
		return e.failJob(context.WithoutCancel(ctx), job, broken.err)
	}
	return err
}

// execute runs one attempt and records its result, with the retries the connector's policy
// allows, and returns the outcome that says what the worker does next (Start: the next
// block's attempt).
func (e *Engine) execute(ctx context.Context, job *river.Job[runArgs], c *runCache, st run.StartAttempt) (run.Outcome, error) {
	entry := e.catalog[st.Block.Type]
	input := c.run.Input
	for {
		sctx, span := e.tracer.Start(ctx, "step "+st.Block.Type, trace.WithAttributes(attribute.String("run.id", job.Args.RunID),
			attribute.String("block.id", st.Block.ID), attribute.Int("attempt", st.Attempt), attribute.String("attempt.id", st.ID)))
		res, execErr := e.call(sctx, entry, job.Args.RunID, input, st)
		if execErr != nil {
			span.RecordError(execErr)
			span.SetStatus(codes.Error, execErr.Error())
		}
		span.End()
		o, err := e.apply(ctx, job, c, func(ctx context.Context, tx pgx.Tx, r *run.Run) (run.Event, error) {
			return e.result(ctx, tx, job, r, st, res, execErr)
		})
		if err != nil || o.Retry == nil {
			return o, err
		}
		// Retry after the policy's backoff. The worker keeps the run meanwhile; a cancel ends
		// the wait at once (the retry then finds the run terminal and starts nothing).
		timer := time.NewTimer(time.Until(o.Retry.At))
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-e.stopping:
			timer.Stop()
			// Shutting down: the retry is handed back, due when the backoff ends.
			at := o.Retry.At
			o, err = e.apply(ctx, job, c, func(context.Context, pgx.Tx, *run.Run) (run.Event, error) {
				return run.HandBack{JobEvent: e.jobEvent(job), Block: st.Block.ID, At: at}, nil
			})
			return run.Outcome{}, err
		}
		timer.Stop()
		o, err = e.apply(ctx, job, c, func(context.Context, pgx.Tx, *run.Run) (run.Event, error) {
			return run.RetryDue{JobEvent: e.jobEvent(job), Block: st.Block.ID, Now: time.Now()}, nil
		})
		if err != nil || o.Start == nil {
			return o, err
		}
		st = *o.Start
	}
}

// result is the event an attempt's result makes. A signal wait looks for a signal stored
// before it began (the oldest unconsumed one of its name, locked until the commit).
func (e *Engine) result(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs], r *run.Run, st run.StartAttempt, res Result, execErr error) (run.Event, error) {
	je, now := e.jobEvent(job), time.Now()
	// Results go on even while the replica stops: the next block is then handed back.
	if execErr != nil {
		code := ""
		if errors.Is(execErr, context.DeadlineExceeded) {
			code = run.CodeTimeout
		}
		return run.Failed{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Message: execErr.Error(), Code: code, Now: now}, nil
	}
	if w := res.Wait; w != nil {
		ev := run.Suspended{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Now: now,
			Wait: run.WaitRequest{Kind: w.Kind, WakeAt: w.WakeAt, Signal: w.Signal, Timeout: w.Timeout}}
		if w.Kind == run.WaitSignal && !r.Status.Terminal() {
			var sig run.Signal
			err := tx.QueryRow(ctx, `SELECT id, name, payload FROM signals WHERE run_id = $1 AND name = $2 AND consumed_at IS NULL
				ORDER BY created_at, id LIMIT 1 FOR UPDATE`, r.ID, w.Signal).Scan(&sig.ID, &sig.Name, &sig.Payload)
			switch {
			case err == nil:
				ev.Buffered = &sig
			case !errors.Is(err, pgx.ErrNoRows):
				return nil, fmt.Errorf("find a buffered signal: %w", err)
			}
		}
		return ev, nil
	}
	out, err := json.Marshal(res.Output)
	if err != nil {
		return run.Failed{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Message: "the output is not JSON: " + err.Error(), Now: now}, nil
	}
	return run.Succeeded{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Output: out, Now: now}, nil
}

// call runs the executor under the step's timeout. An attempt whose params could not be
// resolved fails with why.
func (e *Engine) call(ctx context.Context, entry connectors.Entry, runID string, input any, st run.StartAttempt) (Result, error) {
	if st.ParamErr != nil {
		return Result{}, st.ParamErr
	}
	ex, ok := e.executors[st.Block.Type]
	if !ok {
		return Result{}, fmt.Errorf("no executor for block type %s", st.Block.Type)
	}
	timeout := time.Duration(entry.TimeoutMS) * time.Millisecond
	if ms, ok := intParam(st.Params["timeout_ms"]); ok && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return ex.Execute(cctx, Call{RunID: runID, BlockID: st.Block.ID, Attempt: st.Attempt, Params: st.Params,
		Input: input, Scope: st.Scope, eval: e.interp.Templates().Eval})
}

// complete marks the job completed inside tx.
func (e *Engine) complete(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs]) error {
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete job: %w", err)
	}
	return nil
}
