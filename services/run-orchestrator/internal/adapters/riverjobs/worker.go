package riverjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
	"svc.dev/services/run-orchestrator/internal/adapters/executors"
	"svc.dev/services/run-orchestrator/internal/adapters/runstore"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// A worker holding a run's job drives it: each transaction applies one event to the run (the
// job taking it, an attempt's result, a retry due) through the run store, which carries the
// interpreter's decisions out. An attempt row is durable before its connector runs; a result
// and the next block's attempt commit together, and the worker goes straight on to that block
// without a queue hop. Blocks that become ready together get a job each, so other workers (on
// any replica) run them in parallel.

type worker struct {
	river.WorkerDefaults[runArgs]
	q *Queue
}

// Timeout is off: steps carry their own timeouts, and a run may take long.
func (w *worker) Timeout(*river.Job[runArgs]) time.Duration { return -1 }

// Work drives the run. No run is left behind by a job that keeps failing: a panic is an error
// like any other, and when the last of the job's tries fails too, the run is failed with the
// error recorded (FailJob) rather than left waiting for a job River has discarded.
func (w *worker) Work(ctx context.Context, rj *river.Job[runArgs]) error {
	if rj.Attempt == 1 && !rj.Args.Due && !snoozed(rj.JobRow) {
		// A tagged job on its first try tells the clock where the queue stands until the
		// queue's head is read. A later try, a job given back by the ceiling (River's snooze
		// sets its attempt back and its scheduled_at to the wall clock) and a job due at a time
		// of its own have a wall-clock time there instead: taken for the head, it would put
		// every organization's next job behind the whole queue.
		w.q.fair.Took(rj.ScheduledAt)
	}
	org := rj.Args.Org
	if !w.q.ceiling.acquire(ctx, org, func() bool { return w.q.turns.othersQueued(ctx, org) }, w.q.stopping) {
		// The organization holds its ceiling of this replica's workers: the job goes back to
		// the queue, not counted as a try, and the worker takes what is at the head.
		return river.JobSnooze(0)
	}
	defer w.q.ceiling.release(org)
	job := &runstore.Job{ID: rj.ID, RunID: rj.Args.RunID, Try: rj.Attempt, Handle: rj}
	err := w.q.driveSafely(ctx, rj, job)
	if err == nil || rj.Attempt < rj.MaxAttempts || ctx.Err() != nil {
		return err
	}
	w.q.log.Error("run job failed its last try; failing the run", "run_id", job.RunID, "job_id", job.ID, "attempt", rj.Attempt, "err", err)
	if ferr := w.q.store.FailJob(context.WithoutCancel(ctx), job, fmt.Errorf("the engine could not go on with this run after %d tries: %w", rj.Attempt, err)); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

// snoozed reports whether River has snoozed the job: it counts snoozes in the job's metadata.
func snoozed(j *rivertype.JobRow) bool {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	return len(j.Metadata) > 2 && json.Unmarshal(j.Metadata, &m) == nil && m.Snoozes > 0
}

// NextRetry spaces a failing job's tries 1 s, 2 s, 4 s ... up to a minute apart (River's
// default grows as attempt⁴ seconds, days apart by the last tries): a run whose job fails for
// a passing reason (its database restarting) goes on soon after, and one that keeps failing
// is failed within about 20 minutes.
func (w *worker) NextRetry(job *river.Job[runArgs]) time.Time {
	return time.Now().Add(jobRetryDelay(job.Attempt))
}

// jobRetryDelay is the pause before try attempt+1 of a run's job.
func jobRetryDelay(attempt int) time.Duration {
	d := time.Second << min(max(attempt-1, 0), 6)
	return min(d, time.Minute)
}

// driveSafely is drive with a panic turned into the job's error.
func (q *Queue) driveSafely(ctx context.Context, rj *river.Job[runArgs], job *runstore.Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			q.log.Error("run job panicked", "run_id", job.RunID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("engine panic: %v", p)
		}
	}()
	return q.drive(ctx, rj, job)
}

// yield reports whether the worker is to hand the job's run back after the step it ran,
// because another organization's work is queued ahead of the run's next turn.
func (q *Queue) yield(ctx context.Context, job *runstore.Job) bool {
	rj, ok := job.Handle.(*river.Job[runArgs])
	if !ok || q.isStopping() {
		return false
	}
	return q.turns.yield(ctx, rj.Args.Org)
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

// jobEvent is what a job's events say about the job.
func (q *Queue) jobEvent(job *runstore.Job) run.JobEvent {
	return run.JobEvent{Job: job.ID, Try: job.Try, Stopping: q.isStopping()}
}

// drive runs the job's run until it finishes, suspends, or other workers hold its remaining
// blocks.
func (q *Queue) drive(ctx context.Context, rj *river.Job[runArgs], job *runstore.Job) (err error) {
	runID := job.RunID
	if q.propagator != nil && len(rj.Args.Trace) > 0 {
		ctx = q.propagator.Extract(ctx, propagation.MapCarrier(rj.Args.Trace))
	}
	ctx, span := q.tracer.Start(ctx, "svc-runtime drive", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("run.id", runID), attribute.Int64("river.job.id", job.ID), attribute.Int("river.job.attempt", job.Try)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	runCtx, cancel := context.WithCancelCause(ctx)
	q.mu.Lock()
	if q.running[runID] == nil {
		q.running[runID] = map[int64]context.CancelCauseFunc{}
	}
	q.running[runID][job.ID] = cancel
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.running[runID], job.ID)
		if len(q.running[runID]) == 0 {
			delete(q.running, runID)
		}
		q.mu.Unlock()
		cancel(nil)
	}()
	c := runstore.NewCache()
	o, err := q.store.ApplyJob(runCtx, job, c, func(*run.Run) run.Event {
		return run.Advance{JobEvent: q.jobEvent(job), Now: time.Now()}
	}, q.inline(job))
	if errors.Is(err, run.ErrNotFound) {
		// No such run (it cannot be deleted today): the job has nothing to drive.
		return q.store.CompleteJob(context.WithoutCancel(ctx), job)
	}
	for err == nil && o.Start != nil {
		o, err = q.execute(runCtx, job, c, *o.Start)
	}
	if broken := (*runstore.BrokenRunError)(nil); errors.As(err, &broken) {
		return q.store.FailJob(context.WithoutCancel(ctx), job, broken.Err)
	}
	return err
}

// execute runs one attempt and records its result, with the retries the connector's policy
// allows, and returns the outcome that says what the worker does next (Start: the next
// block's attempt).
func (q *Queue) execute(ctx context.Context, job *runstore.Job, c *runstore.Cache, st run.StartAttempt) (run.Outcome, error) {
	for {
		st = q.prepare(ctx, st) // outside any transaction: the full expression budget
		res, execErr := q.step(ctx, job, st)
		// The result is made here, outside the transaction: its output is encoded once, and
		// its size known before the write.
		ev := q.result(job, st, res, execErr)
		if q.yield(ctx, job) {
			ev = yielding(ev)
		}
		done := q.heavyWrite(ctx, ev)
		o, err := q.store.ApplyJob(ctx, job, c, func(*run.Run) run.Event { return ev }, q.inline(job))
		done()
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
		case <-q.stopping:
			timer.Stop()
			// Shutting down: the retry is handed back, due when the backoff ends.
			_, err = q.store.ApplyJob(ctx, job, c, func(*run.Run) run.Event {
				return run.HandBack{JobEvent: q.jobEvent(job), Block: st.Block.ID, At: at}
			}, nil)
			return run.Outcome{}, err
		}
		timer.Stop()
		o, err = q.store.ApplyJob(ctx, job, c, func(*run.Run) run.Event {
			return run.RetryDue{JobEvent: q.jobEvent(job), Block: st.Block.ID, Now: time.Now()}
		}, q.inline(job))
		if err != nil || o.Start == nil {
			return o, err
		}
		st = *o.Start
	}
}

// prepare resolves the params of an attempt that went over the inline budget, under the full
// budget. Such evaluations take turns on a replica (heavy: half its cores, at least one,
// shared with the writes of huge results, heavyWrite), so however many an organization starts
// at once, they hold a bounded share of the CPU and the light work of others keeps the rest.
// An attempt whose run ends while it waits fails with why (its result is then ignored).
func (q *Queue) prepare(ctx context.Context, st run.StartAttempt) run.StartAttempt {
	if !st.Deferred {
		return st.Prepare()
	}
	release, ok := q.heavyTurn(ctx)
	if !ok {
		st.ParamErr = fmt.Errorf("waiting to evaluate the params: %w", context.Cause(ctx))
		return st
	}
	defer release()
	return st.Prepare()
}

// heavyTurn waits for a turn of the replica's heavy work and returns its release; ok is false
// when ctx ended first (nothing to release then).
func (q *Queue) heavyTurn(ctx context.Context) (release func(), ok bool) {
	select {
	case q.heavy <- struct{}{}:
		return func() { <-q.heavy }, true
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
func (q *Queue) heavyWrite(ctx context.Context, ev run.Event) (release func()) {
	s, ok := ev.(run.Succeeded)
	if !ok || len(s.Output)+len(s.Input) < heavyOutput {
		return func() {}
	}
	release, _ = q.heavyTurn(ctx)
	return release
}

// step runs attempt st's connector in a span of its own.
func (q *Queue) step(ctx context.Context, job *runstore.Job, st run.StartAttempt) (executors.Result, error) {
	sctx, span := q.tracer.Start(ctx, "step "+st.Block.Type, trace.WithAttributes(attribute.String("run.id", job.RunID),
		attribute.String("block.id", st.Block.ID), attribute.Int("attempt", st.Attempt), attribute.String("attempt.id", st.ID)))
	defer span.End()
	res, err := q.call(sctx, q.catalog[st.Block.Type], job.RunID, st)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return res, err
}

// inline runs, inside the step's transaction, the attempts of connectors whose only effect is
// their result (executors.Inline): a trigger, transform, log, condition, fail or wait block
// is then begun and finished in one commit. A failure is not joined: the attempt commits as
// begun and runs again the usual way, under its connector's retry policy.
func (q *Queue) inline(job *runstore.Job) runstore.InlineFunc {
	return func(ctx context.Context, st run.StartAttempt) (run.Event, bool) {
		if !executors.Inline(st.Block.Type) || st.ParamErr != nil || st.Deferred {
			return nil, false
		}
		res, err := q.step(ctx, job, st)
		if err != nil {
			return nil, false
		}
		ev := q.result(job, st, res, nil)
		if _, failed := ev.(run.Failed); failed {
			return nil, false
		}
		return ev, true
	}
}

// result is the event an attempt's result makes.
func (q *Queue) result(job *runstore.Job, st run.StartAttempt, res executors.Result, execErr error) run.Event {
	je, now := q.jobEvent(job), time.Now()
	input := resolvedInput(st)
	if execErr != nil {
		code := ""
		if errors.Is(execErr, context.DeadlineExceeded) {
			code = run.CodeTimeout
		}
		if le := expression.AsLimit(execErr); le != nil {
			code = le.Code
		}
		if pe := (*executors.ParamError)(nil); errors.As(execErr, &pe) {
			code = run.CodeInvalidParam
		}
		if errors.Is(execErr, executors.ErrPrivateTarget) {
			code = run.CodePrivateNetworkRefused
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
func (q *Queue) call(ctx context.Context, entry connectors.Entry, runID string, st run.StartAttempt) (executors.Result, error) {
	if st.ParamErr != nil {
		return executors.Result{}, st.ParamErr
	}
	ex, ok := q.executors[st.Block.Type]
	if !ok {
		return executors.Result{}, fmt.Errorf("no executor for block type %s", st.Block.Type)
	}
	var err error
	if st.Params, err = q.params.Check(st.Block.Type, st.Params); err != nil {
		return executors.Result{}, err
	}
	timeout := time.Duration(entry.TimeoutMS) * time.Millisecond
	if ms, ok := executors.IntParam(st.Params["timeout_ms"]); ok && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	timeout = q.params.Bound(st.Block.Type, timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	input := st.Scope["input"]
	return ex.Execute(cctx, executors.Call{RunID: runID, BlockID: st.Block.ID, Attempt: st.Attempt, Params: st.Params,
		Input: input, Scope: st.Scope, Eval: st.Eval})
}

// Eager is the run store's EagerFunc: a run whose blocks are all triggers, transforms, logs
// and conditions (never a wait or a fail block, which cannot end a run in one go), and no
// more than runstore.MaxInline of them, is offered to run at its dispatch, through the same
// inline path a job takes, in a span of the dispatch's trace that ends with the dispatch. Its
// log lines are written once the dispatch commits.
func (q *Queue) Eager(ctx context.Context, r *run.Run) (context.Context, runstore.InlineFunc, func(committed bool)) {
	if len(r.Def.Blocks) > runstore.MaxInline {
		return ctx, nil, nil
	}
	for _, b := range r.Def.Blocks {
		if !executors.Inline(b.Type) || b.Type == "wait" || b.Type == "fail" {
			return ctx, nil, nil
		}
	}
	ctx, span := q.tracer.Start(ctx, "svc-runtime run at dispatch", trace.WithAttributes(attribute.String("run.id", r.ID)))
	logs := &executors.DeferredLogs{}
	inline := q.inline(&runstore.Job{RunID: r.ID, Try: 1})
	return ctx, func(ctx context.Context, st run.StartAttempt) (run.Event, bool) {
			return inline(logs.Defer(ctx), st)
		}, func(committed bool) {
			if committed {
				logs.Write()
			} else {
				logs.Drop()
				span.SetAttributes(attribute.Bool("run.stored", false))
			}
			span.End()
		}
}
