package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// A worker holding a run's job drives it: each transaction applies one event to the run (the
// job taking it, an attempt's result, a retry due). An attempt row is durable before its
// connector runs; a result and the next block's attempt commit together, and the worker goes
// straight on to that block without a queue hop. Blocks that become ready together get a job
// each, so other workers (on any replica) run them in parallel.

// Drive runs job's run until it finishes, suspends, or other workers hold its remaining
// blocks. A panic is returned as an error like any other; a run that cannot be read is
// failed with why.
func (e *Engine) Drive(ctx context.Context, job *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("run job panicked", "run_id", job.RunID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("engine panic: %v", p)
		}
	}()
	return e.drive(ctx, job)
}

// Fail fails the run of job with cause (its job failed its last try) and completes the job.
func (e *Engine) Fail(ctx context.Context, job *Job, cause error) error {
	return e.failJob(ctx, job, cause)
}

// failJob is RunRepository.FailJob, with what it committed recorded.
func (e *Engine) failJob(ctx context.Context, job *Job, cause error) error {
	o, err := e.runs.FailJob(ctx, job, cause)
	if err == nil {
		e.metrics.committed(ctx, nil, &o)
	}
	return err
}

func (e *Engine) drive(ctx context.Context, job *Job) (err error) {
	ctx, span := e.tracer.Start(ctx, "svc-runtime drive", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("run.id", job.RunID), attribute.Int64("river.job.id", job.ID), attribute.Int("river.job.attempt", job.Try)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer e.track(job, cancel)()
	defer cancel(nil)
	e.metrics.started(ctx, job.Ready)
	o, err := e.apply(runCtx, job, func(*run.Run) run.Event {
		return run.Advance{JobEvent: e.jobEvent(job), Now: time.Now()}
	}, true)
	if errors.Is(err, run.ErrNotFound) {
		// No such run: the job has nothing to drive.
		return e.runs.CompleteJob(context.WithoutCancel(ctx), job)
	}
	// The job's wait was recorded as it began; each step after it the worker goes straight on
	// to has been ready since the commit before it.
	var ready time.Time
	for err == nil && o.Start != nil {
		o, err = e.execute(runCtx, job, *o.Start, ready)
		ready = time.Now()
	}
	if broken := (*BrokenRunError)(nil); errors.As(err, &broken) {
		return e.failJob(context.WithoutCancel(ctx), job, broken.Err)
	}
	return err
}

// jobEvent is what a job's events say about the job.
func (e *Engine) jobEvent(job *Job) run.JobEvent {
	return run.JobEvent{Job: job.ID, Try: job.Try, Stopping: e.isStopping()}
}

// apply applies the event ev builds to job's run, in one transaction: a run that cannot be
// read is a *BrokenRunError. A signal wait gets the oldest unconsumed signal of its name
// stored before it began, locked until the commit, which it then consumes. With inline, while
// the outcome starts an attempt that runs inline (runInline), its result is applied in the
// same transaction, up to MaxInline of them: the attempt's row is then written begun and
// finished in one commit.
func (e *Engine) apply(ctx context.Context, job *Job, ev func(*run.Run) run.Event, inline bool) (run.Outcome, error) {
	var calls []timed // the inline attempts' calls, recorded once their results committed
	o, err := e.update(ctx, job.RunID, job, func(ctx context.Context, tx RunTx) (run.Outcome, error) {
		calls = calls[:0]
		if err := tx.Broken(); err != nil {
			return run.Outcome{}, &BrokenRunError{err}
		}
		r := tx.Run()
		apply := func(ev run.Event) (run.Outcome, error) { return e.applyEvent(ctx, tx, r, ev) }
		o, err := apply(ev(r))
		if err != nil || !inline {
			return o, err
		}
		return e.inlineChain(ctx, job, o, apply, &calls)
	})
	if err == nil {
		e.metrics.took(calls...)
	}
	return o, err
}

// inlineChain goes on from outcome o while it starts an attempt that runs inline: it runs the
// attempt (runInline) and applies its result with apply, up to MaxInline of them, and returns
// the outcome of them all. The calls whose results were applied are appended to calls.
func (e *Engine) inlineChain(ctx context.Context, job *Job, o run.Outcome, apply func(run.Event) (run.Outcome, error), calls *[]timed) (run.Outcome, error) {
	for n := 0; n < MaxInline && o.Fusable(); n++ {
		next, ok := e.runInline(ctx, job, *o.Start, calls)
		if !ok {
			break
		}
		more, err := apply(next)
		if err != nil {
			return o, err
		}
		o.Then(more)
	}
	return o, nil
}

// applyEvent applies event to the locked run r, a signal wait with its buffered signal.
func (e *Engine) applyEvent(ctx context.Context, tx RunTx, r *run.Run, event run.Event) (run.Outcome, error) {
	if w, ok := event.(run.Suspended); ok && w.Wait.Kind == run.WaitSignal && !r.Status.Terminal() {
		sig, err := tx.BufferedSignal(ctx, w.Wait.Signal)
		if err != nil {
			return run.Outcome{}, fmt.Errorf("find a buffered signal: %w", err)
		}
		if sig != nil {
			w.Buffered = sig
			event = w
		}
	}
	return e.interp.Apply(r, event)
}

// execute runs one attempt and records its result, with the retries the connector's policy
// allows, and returns the outcome that says what the worker does next (Start: the next
// block's attempt). ready is when the attempt became ready (zero: its wait is recorded
// already).
func (e *Engine) execute(ctx context.Context, job *Job, st run.StartAttempt, ready time.Time) (run.Outcome, error) {
	for {
		e.metrics.started(ctx, ready)
		st = e.prepare(ctx, st) // outside any transaction: the full expression budget
		res, call, execErr := e.step(ctx, job.RunID, st)
		// The result is made here, outside the transaction: its output is encoded once, and
		// its size known before the write.
		ev := e.result(job, st, res, execErr)
		if e.yield(ctx, job) {
			ev = yielding(ev)
		}
		done := e.heavyWrite(ctx, ev)
		o, err := e.apply(ctx, job, func(*run.Run) run.Event { return restamped(ev) }, true)
		done()
		if err == nil {
			e.metrics.took(call)
		}
		if err != nil || o.Retry == nil {
			return o, err
		}
		// Retry after the policy's backoff. The worker keeps the run meanwhile; a cancel ends
		// the wait at once (the retry then finds the run terminal and starts nothing).
		at := o.Retry.At
		timer := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-e.stopping:
			timer.Stop()
			// Shutting down: the retry is handed back, due when the backoff ends.
			_, err = e.apply(ctx, job, func(*run.Run) run.Event {
				return run.HandBack{JobEvent: e.jobEvent(job), Block: st.Block.ID, At: at}
			}, false)
			return run.Outcome{}, err
		}
		timer.Stop()
		o, err = e.apply(ctx, job, func(*run.Run) run.Event {
			return run.RetryDue{JobEvent: e.jobEvent(job), Block: st.Block.ID, Now: time.Now()}
		}, true)
		if err != nil || o.Start == nil {
			return o, err
		}
		st, ready = *o.Start, at
	}
}

// restamped is ev with a failure's time taken now, inside the transaction that records it.
// The attempt's finishedAt is that transaction's time (Postgres now(), its start), and the
// retry is due a backoff after the failure's time: taken before the transaction began (a wait
// for the lock, a heavy write's turn), it would put the next attempt's start less than a
// backoff after the recorded end.
func restamped(ev run.Event) run.Event {
	if f, ok := ev.(run.Failed); ok {
		f.Now = time.Now()
		return f
	}
	return ev
}

// yield reports whether the worker is to hand the job's run back after the step it ran,
// because another organization's work is queued ahead of the run's next turn.
func (e *Engine) yield(ctx context.Context, job *Job) bool {
	if job.Handle == nil || e.isStopping() {
		return false
	}
	return e.turns.Yield(ctx, job.Org)
}

// yielding is ev with its job giving the worker up between steps (a step's result only).
func yielding(ev run.Event) run.Event {
	switch e := ev.(type) {
	case run.Succeeded:
		e.Yield = true
		return e
	case run.Failed:
		e.Yield = true
		return e
	case run.Suspended:
		e.Yield = true
		return e
	}
	return ev
}

// prepare resolves the params of an attempt that went over the inline budget, under the full
// budget. Such evaluations take turns on a replica (heavy: half its cores, at least one,
// shared with the writes of huge results, heavyWrite), so however many an organization starts
// at once, they hold a bounded share of the CPU and the light work of others keeps the rest.
// An attempt whose run ends while it waits fails with why (its result is then ignored).
func (e *Engine) prepare(ctx context.Context, st run.StartAttempt) run.StartAttempt {
	if !st.Deferred {
		return st.Prepare()
	}
	release, ok := e.heavyTurn(ctx)
	if !ok {
		st.ParamErr = fmt.Errorf("waiting to evaluate the params: %w", context.Cause(ctx))
		return st
	}
	defer release()
	return st.Prepare()
}

// heavyTurn waits for a turn of the replica's heavy work and returns its release; ok is false
// when ctx ended first (nothing to release then).
func (e *Engine) heavyTurn(ctx context.Context) (release func(), ok bool) {
	select {
	case e.heavy <- struct{}{}:
		return func() { <-e.heavy }, true
	case <-ctx.Done():
		return func() {}, false
	}
}

// heavyOutput is the size of a step's result (output and resolved input) from which writing it
// is heavy work.
const heavyOutput = 256 << 10

// heavyWrite takes a turn of the replica's heavy work (as prepare does) for writing ev when
// it carries a large output or input, and returns its release. Writing megabytes, then
// reading them back for the steps after, costs the replica and Postgres CPU in proportion:
// an organization's runs making huge outputs at once would take every core from the light
// steps of everyone else. Taking turns bounds them to half the replica's cores. A context
// that ends while waiting writes anyway (the run's end or the replica's stop is recorded
// that way).
func (e *Engine) heavyWrite(ctx context.Context, ev run.Event) (release func()) {
	s, ok := ev.(run.Succeeded)
	if !ok || len(s.Output)+len(s.Input) < heavyOutput {
		return func() {}
	}
	release, _ = e.heavyTurn(ctx)
	return release
}

// timed is a connector's call: its block type, how long it took, and the span it ran in (the
// exemplar of its record). It is recorded once the attempt's result committed, so that a call
// whose result is dropped (an inline failure, which runs again the usual way; a run at its
// dispatch that goes to a job after all) is not counted with the one that counts.
type timed struct {
	typ  string
	took time.Duration
	span trace.SpanContext
}

// step runs attempt st's connector in a span of its own.
func (e *Engine) step(ctx context.Context, runID string, st run.StartAttempt) (connectors.Result, timed, error) {
	sctx, span := e.tracer.Start(ctx, "step "+st.Block.Type, trace.WithAttributes(attribute.String("run.id", runID),
		attribute.String("block.id", st.Block.ID), attribute.Int("attempt", st.Attempt), attribute.String("attempt.id", st.ID)))
	defer span.End()
	began := time.Now()
	res, err := e.call(sctx, e.catalog[st.Block.Type], runID, st)
	call := timed{typ: st.Block.Type, took: time.Since(began), span: span.SpanContext()}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return res, call, err
}

// runInline runs, inside the step's transaction, an attempt of a connector whose only effect
// is its result (connectors.Runtime.Inline): such a block is then begun and finished in one
// commit. A failure is not joined: the attempt commits as
// begun and runs again the usual way, under its connector's retry policy.
func (e *Engine) runInline(ctx context.Context, job *Job, st run.StartAttempt, calls *[]timed) (run.Event, bool) {
	if !e.inline[st.Block.Type] || st.ParamErr != nil || st.Deferred {
		return nil, false
	}
	res, call, err := e.step(ctx, job.RunID, st)
	if err != nil {
		return nil, false
	}
	ev := e.result(job, st, res, nil)
	if _, failed := ev.(run.Failed); failed {
		return nil, false
	}
	*calls = append(*calls, call)
	return ev, true
}

// result is the event an attempt's result makes.
func (e *Engine) result(job *Job, st run.StartAttempt, res connectors.Result, execErr error) run.Event {
	je, now := e.jobEvent(job), time.Now()
	input := resolvedInput(st)
	if execErr != nil {
		code := ""
		if errors.Is(execErr, context.DeadlineExceeded) {
			code = run.CodeTimeout
		}
		if le := expression.AsLimit(execErr); le != nil {
			code = le.Code
		}
		if pe := (*ParamError)(nil); errors.As(execErr, &pe) {
			code = run.CodeInvalidParam
		}
		if coded := (interface{ ErrorCode() string })(nil); errors.As(execErr, &coded) {
			code = coded.ErrorCode()
		}
		return run.Failed{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Message: execErr.Error(), Code: code, Input: input, Now: now}
	}
	if w := res.Wait; w != nil {
		return run.Suspended{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Now: now, Input: input,
			Wait: run.WaitRequest{Kind: w.Kind, WakeAt: w.WakeAt, Signal: w.Signal, Timeout: w.Timeout}}
	}
	out, err := json.Marshal(res.Output)
	if err != nil {
		return run.Failed{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Message: "the output is not JSON: " + err.Error(), Input: input, Now: now}
	}
	return run.Succeeded{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Output: out, Input: input, Now: now}
}

// resolvedInput is the input to record for an attempt whose params its worker resolved
// (run.StartAttempt.Resolved, encoded by Prepare, outside the transaction); nil for the others.
func resolvedInput(st run.StartAttempt) json.RawMessage {
	if !st.Resolved || st.ParamErr != nil {
		return nil
	}
	return st.Input
}

// call runs the executor under the step's timeout. An attempt whose params could not be
// resolved fails with why.
func (e *Engine) call(ctx context.Context, entry connectors.Entry, runID string, st run.StartAttempt) (connectors.Result, error) {
	if st.ParamErr != nil {
		return connectors.Result{}, st.ParamErr
	}
	ex, ok := e.executors[st.Block.Type]
	if !ok {
		return connectors.Result{}, fmt.Errorf("no executor for block type %s", st.Block.Type)
	}
	var err error
	if st.Params, err = e.params.Check(st.Block.Type, st.Params); err != nil {
		return connectors.Result{}, err
	}
	timeout := time.Duration(entry.TimeoutMS) * time.Millisecond
	if ms, ok := connectors.IntParam(st.Params["timeout_ms"]); ok && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	timeout = e.params.Bound(st.Block.Type, timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	input := st.Scope["input"]
	return ex.Execute(cctx, connectors.Call{RunID: runID, BlockID: st.Block.ID, Attempt: st.Attempt, Params: st.Params,
		Input: input, Scope: st.Scope, Eval: st.Eval})
}
