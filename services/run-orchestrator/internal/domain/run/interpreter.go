package run

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"svc.dev/proto/connectors/expression"
)

// The interpreter: a pure state machine over a run. Apply takes an event, changes the run's
// state and returns the decisions (an Outcome) that the engine's adapters carry out in the
// run's transaction, and the changes they publish after it commits. It reads no clock, no
// database and starts nothing: everything it needs is in the run and the event.

// MaxAttemptsAnyKind stops a step after this many attempts of any kind.
const MaxAttemptsAnyKind = 10

// Error codes of attempts the interpreter ends itself.
const (
	CodeLost    = "lost"
	CodeTimeout = "timeout"
)

// Run is what the interpreter sees of a run: the pinned definition, the input, the state of
// its blocks, its status and change sequence. Seq moves on with every attempt change.
type Run struct {
	ID, OrganizationID, WorkflowID string
	Status                         Status
	Def                            Definition
	Input                          any
	State                          State
	Seq                            int64
}

// Connector is what the interpreter knows of a block type: its retry policy, the params it
// keeps raw (x-expression: evaluated by the connector itself) and params the server adds.
type Connector struct {
	Retry RetryPolicy
	Raw   map[string]bool
	Extra map[string]any
}

// RetryPolicy is a connector's retry policy (the catalog's retry_policy).
type RetryPolicy struct {
	MaxAttempts        int
	InitialIntervalMS  int64
	BackoffCoefficient float64
	MaxIntervalMS      int64
}

// Backoff is the pause before attempt n+1 after attempt n failed.
func (p RetryPolicy) Backoff(n int) time.Duration {
	ms := float64(p.InitialIntervalMS) * math.Pow(p.BackoffCoefficient, float64(n-1))
	if p.MaxIntervalMS > 0 && ms > float64(p.MaxIntervalMS) {
		ms = float64(p.MaxIntervalMS)
	}
	if ms < 1 || math.IsNaN(ms) {
		ms = 1
	}
	return time.Duration(ms) * time.Millisecond
}

// Interpreter applies the rules of a run's execution (docs/API.md, "Runs").
type Interpreter struct {
	connectors map[string]Connector
	templates  *Templates
	newID      func() string
	limits     Limits
}

// NewInterpreter builds an interpreter over the connector catalog; newID names new attempts.
func NewInterpreter(connectors map[string]Connector, templates *Templates, newID func() string, opts ...Option) *Interpreter {
	if templates == nil || newID == nil {
		panic("run: NewInterpreter needs templates and newID")
	}
	in := &Interpreter{connectors: connectors, templates: templates, newID: newID, limits: Limits{}.withDefaults()}
	for _, opt := range opts {
		opt(in)
	}
	return in
}

// Templates is the interpreter's template evaluator (conditions evaluate with it too).
func (in *Interpreter) Templates() *Templates { return in.templates }

// Apply applies ev to r: r's state moves on, and the outcome says what to write and publish.
// An event that no longer applies (a result for an attempt that is not in flight any more: the
// run was cancelled, or its replica taken for dead; a timer for a wait already released)
// changes nothing. The errors: a FinishedError for a signal or a cancel of a run that has
// ended (cancelling a cancelled run is fine), and an unknown event; r is then unchanged.
func (in *Interpreter) Apply(r *Run, ev Event) (Outcome, error) {
	var o Outcome
	before := r.Status
	switch ev := ev.(type) {
	case Advance:
		in.advance(r, ev, &o)
	case Succeeded:
		in.succeeded(r, ev, &o)
	case Failed:
		in.failed(r, ev, &o)
	case Suspended:
		in.suspended(r, ev, &o)
	case RetryDue:
		in.retryDue(r, ev, &o)
	case HandBack:
		handBack(r, ev, &o)
	case AttemptsLost:
		attemptsLost(r, ev, &o)
	case TimerFired:
		timerFired(r, ev, &o)
	case SignalArrived:
		if r.Status.Terminal() {
			return Outcome{}, &FinishedError{Status: r.Status}
		}
		signalArrived(r, ev, &o)
	case CancelRequested:
		switch r.Status {
		case StatusCancelled:
			return Outcome{}, nil
		case StatusCompleted, StatusFailed:
			return Outcome{}, &FinishedError{Status: r.Status}
		}
		cancel(r, ev, &o)
	default:
		return Outcome{}, fmt.Errorf("run: unknown event %T", ev)
	}
	if r.Status != before {
		// A status change takes a sequence of its own, after the attempts' changes of this
		// commit: the event stream orders and resumes by it, so every status a run goes
		// through is kept (the status log), not only where it ends up.
		r.Seq++
		c := Change{Kind: ChangeStatus, Status: r.Status, Seq: r.Seq}
		if r.Status == StatusWaiting {
			c.BlockID, c.Wait = r.firstWait()
		}
		o.change(r, c, eventTime(ev))
	}
	return o, nil
}

func eventTime(ev Event) time.Time {
	switch ev := ev.(type) {
	case Advance:
		return ev.Now
	case Succeeded:
		return ev.Now
	case Failed:
		return ev.Now
	case Suspended:
		return ev.Now
	case RetryDue:
		return ev.Now
	case HandBack:
		return ev.At
	case AttemptsLost:
		return ev.Now
	case TimerFired:
		return ev.Now
	case SignalArrived:
		return ev.Now
	case CancelRequested:
		return ev.Now
	}
	return time.Time{}
}

// firstWait is the wait of the waiting block armed first.
func (r *Run) firstWait() (string, *Wait) {
	var (
		first *Wait
		block string
	)
	for _, id := range r.Def.order(r.State) {
		if b := r.State.Blocks[id]; b.Status == BlockWaiting && b.Wait != nil && (first == nil || b.Wait.before(first)) {
			first, block = b.Wait, id
		}
	}
	if first == nil {
		return "", nil
	}
	w := *first
	return block, &w
}

// ---- a job drives the run ------------------------------------------------------------------

func (in *Interpreter) advance(r *Run, ev Advance, o *Outcome) {
	if r.Status.Terminal() {
		o.CompleteJob = true
		return
	}
	if ev.Try > 1 && reclaim(r, ev, o) {
		return
	}
	in.proceed(r, ev.JobEvent, ev.Now, o)
}

// reclaim is a job's later try taking back the blocks its earlier try held: that try ended
// mid-step (its transaction failed) with the block still running, and no one else would move
// it on. The attempt in flight is lost (its connector may have run) and the block goes back to
// pending; one at the cap of attempts of any kind fails the run. It reports whether the run
// ended.
func reclaim(r *Run, ev Advance, o *Outcome) bool {
	stopped := ""
	for _, id := range r.Def.order(r.State) {
		bs := r.State.Blocks[id]
		if bs.Status != BlockRunning || bs.Job != ev.Job {
			continue
		}
		bs = o.touch(r, id)
		if bs.InFlight {
			bs.Lost++
			endAttempt(r, o, id, "lost", nil, errorBody(
				fmt.Sprintf("the try of job %d that ran this attempt failed before recording its result (try %d of the job took the block back)", ev.Job, ev.Try),
				CodeLost), ev.Now)
		}
		bs.Status, bs.RetryAt = BlockPending, time.Time{}
		if bs.Attempts >= MaxAttemptsAnyKind {
			bs.Status, stopped = BlockFailed, id
		}
	}
	if stopped == "" {
		return false
	}
	finish(r, o, StatusFailed, stopped, fmt.Sprintf("step stopped after %d attempts (the last was lost: its job's try failed mid-step)", MaxAttemptsAnyKind), ev.Now)
	o.CompleteJob = true
	return true
}

// proceed decides what the run does next, for the acting job (the run is not terminal): it
// starts the next ready block's attempt, giving every other ready block a job of its own; or,
// with nothing ready, finishes the run or leaves it to the jobs of its running blocks and to
// its waits, completing the acting job.
func (in *Interpreter) proceed(r *Run, job JobEvent, now time.Time, o *Outcome) {
	ready, skipped := r.State.Advance(r.Def)
	for _, id := range skipped {
		o.touch(r, id)
	}
	if len(ready) == 0 {
		// Nothing to start: the run finishes, or waits for its other jobs and its waits, here
		// and now, even when the worker is giving the run up (handed on, its end would wait a
		// turn in the queue for nothing).
		o.CompleteJob = true
		if !r.State.Active() {
			in.finishCompleted(r, o, now)
			return
		}
		if r.State.count(BlockWaiting) > 0 && r.State.count(BlockRunning) == 0 {
			r.Status = StatusWaiting
		}
		return
	}
	if job.Stopping || job.Yield {
		// Graceful shutdown between steps, or the worker yielded to another organization's
		// turn: a fresh job continues the run, here or elsewhere, in its turn (the ready blocks
		// stay pending; it finds them).
		o.NewJobs++
		o.CompleteJob = true
		return
	}
	// Parallel branches: one job per other ready block, queued once per block (the block
	// records it), so a wide fan-out queues as many jobs as it has blocks. Any job takes any
	// ready block; one that finds none left (this one may get there first) completes.
	for _, id := range ready[1:] {
		if bs, ok := r.State.Blocks[id]; !ok || !bs.Queued {
			o.touch(r, id).Queued = true
			o.NewJobs++
		}
	}
	block, _ := r.Def.Block(ready[0])
	bs := o.touch(r, block.ID)
	bs.Status, bs.Job = BlockRunning, job.Job
	r.Status = StatusRunning
	in.begin(r, block, bs.Attempts+1, o, now)
}

// begin starts attempt n of block: its params resolved, its row to insert. It runs in the
// step's transaction (or the start request, for a run finished at its dispatch), so the params
// are resolved under the small inline budget: params that go over it are left for the
// attempt's worker to resolve with the full budget outside the transaction (Prepare), and the
// attempt is begun with the params as written (Deferred), never run inline.
func (in *Interpreter) begin(r *Run, block Block, n int, o *Outcome, now time.Time) {
	bs := o.touch(r, block.ID)
	r.Seq++
	st := StartAttempt{ID: in.newID(), Block: block, Attempt: n, Seq: r.Seq, in: in}
	st.budget = expression.NewBudget(in.templates.limits.Inline)
	st.Scope = in.scope(r)
	st.Params, st.ParamErr = in.resolve(block, st.Scope, st.budget)
	if le := expression.AsLimit(st.ParamErr); le != nil && le.Inline {
		st.Params, st.ParamErr, st.Deferred = in.unresolved(block), nil, true
	}
	bs.Attempts, bs.AttemptID, bs.InFlight, bs.RetryAt, bs.Queued = n, st.ID, true, time.Time{}, false
	o.Start = &st
	o.Begun = append(o.Begun, st)
	o.change(r, Change{Kind: ChangeAttemptStarted, Seq: st.Seq, BlockID: block.ID, AttemptID: st.ID, Attempt: n, AttemptStatus: "running"}, now)
}

// Resolve resolves block's params against the run's scope under a fresh budget of limits
// (the interpreter's inline limits when zero).
func (in *Interpreter) Resolve(r *Run, block Block, limits expression.Limits) (params, scope map[string]any, err error) {
	if limits == (expression.Limits{}) {
		limits = in.templates.limits.Inline
	}
	scope = in.scope(r)
	params, err = in.resolve(block, scope, expression.NewBudget(limits))
	return params, scope, err
}

// scope is the template scope of r (the orchestrator README, "Templates"): input, the outputs of the blocks that
// succeeded, run.id and workflow.id.
func (in *Interpreter) scope(r *Run) map[string]any {
	return map[string]any{
		"input": r.Input, "steps": r.State.scopeSteps(),
		"run": map[string]any{"id": r.ID}, "workflow": map[string]any{"id": r.WorkflowID},
	}
}

// resolve resolves block's params in scope, every param charged to the one budget b. Raw
// params (the connector's Raw: x-expression params, a JSON Schema, a trigger's concurrency,
// whose key the dispatch evaluates) are kept as they are; the first param that fails is the
// error.
func (in *Interpreter) resolve(block Block, scope map[string]any, b *expression.Budget) (params map[string]any, err error) {
	conn := in.connectors[block.Type]
	params = make(map[string]any, len(block.Params)+len(conn.Extra))
	for k, v := range block.Params {
		if conn.Raw[k] {
			params[k] = v
			continue
		}
		res, rerr := in.templates.Resolve(v, scope, b)
		if rerr != nil && err == nil {
			err = fmt.Errorf("param %s: %w", k, rerr)
			if expression.AsLimit(rerr) != nil {
				break // the budget is spent: every other param would fail the same way
			}
		}
		params[k] = res
	}
	for k, v := range conn.Extra {
		params[k] = v
	}
	return params, err
}

// unresolved are block's params as written (and the server's), the recorded input of an
// attempt whose params are resolved later.
func (in *Interpreter) unresolved(block Block) map[string]any {
	conn := in.connectors[block.Type]
	params := make(map[string]any, len(block.Params)+len(conn.Extra))
	for k, v := range block.Params {
		params[k] = v
	}
	for k, v := range conn.Extra {
		params[k] = v
	}
	return params
}

// inFlight reports whether the result is for the block's attempt in flight, held by the job.
func inFlight(r *Run, job int64, block, attemptID string) bool {
	if r.Status.Terminal() {
		return false // cancelled while the connector ran: the cancel recorded the attempt
	}
	bs, ok := r.State.Blocks[block]
	return ok && bs.Status == BlockRunning && bs.InFlight && bs.AttemptID == attemptID && bs.Job == job
}

func (in *Interpreter) succeeded(r *Run, ev Succeeded, o *Outcome) {
	if !inFlight(r, ev.Job, ev.Block, ev.AttemptID) {
		return
	}
	if block, _ := r.Def.Block(ev.Block); in.outputTooLarge(block, len(ev.Output)) != "" {
		in.failed(r, Failed{JobEvent: ev.JobEvent, Block: ev.Block, AttemptID: ev.AttemptID, Code: CodeOutputTooLarge,
			Message: in.outputTooLarge(block, len(ev.Output)), Input: ev.Input, Now: ev.Now}, o)
		return
	}
	recordInput(o, ev.AttemptID, ev.Input)
	succeed(r, o, ev.Block, ev.Output, ev.Now)
	in.proceed(r, ev.JobEvent, ev.Now, o)
}

// recordInput replaces the recorded input of an attempt whose params its worker resolved
// after it began (StartAttempt.Deferred).
func recordInput(o *Outcome, attemptID string, input json.RawMessage) {
	if input != nil {
		o.Inputs = append(o.Inputs, AttemptInput{ID: attemptID, Input: input})
	}
}

// succeed records the block's attempt in flight as succeeded with output.
func succeed(r *Run, o *Outcome, block string, output json.RawMessage, now time.Time) {
	bs := o.touch(r, block)
	bs.Status, bs.Output, bs.Wait = BlockSucceeded, output, nil
	endAttempt(r, o, block, "succeeded", output, nil, now)
}

func (in *Interpreter) failed(r *Run, ev Failed, o *Outcome) {
	if !inFlight(r, ev.Job, ev.Block, ev.AttemptID) {
		return
	}
	recordInput(o, ev.AttemptID, ev.Input)
	bs := o.touch(r, ev.Block)
	ev.Message = clipMessage(ev.Message)
	endAttempt(r, o, ev.Block, "failed", nil, errorBody(ev.Message, ev.Code), ev.Now)
	block, _ := r.Def.Block(ev.Block)
	policy := in.connectors[block.Type].Retry
	// Lost attempts do not count against max_attempts; 10 of any kind stop the step. A
	// failure that a retry would repeat (final) is not retried.
	if !final(ev.Code) && bs.Attempts-bs.Lost < policy.MaxAttempts && bs.Attempts < MaxAttemptsAnyKind {
		bs.RetryAt = ev.Now.Add(policy.Backoff(bs.Attempts))
		o.Retry = &Retry{Block: ev.Block, Attempt: bs.Attempts + 1, At: bs.RetryAt}
		o.change(r, Change{Kind: ChangeRetryScheduled, BlockID: ev.Block, Attempt: bs.Attempts + 1, RetryAt: bs.RetryAt}, ev.Now)
		return
	}
	bs.Status = BlockFailed
	finish(r, o, StatusFailed, ev.Block, ev.Message, ev.Now)
	o.CompleteJob = true
}

func (in *Interpreter) retryDue(r *Run, ev RetryDue, o *Outcome) {
	bs, ok := r.State.Blocks[ev.Block]
	if r.Status.Terminal() || !ok || bs.Status != BlockRunning || bs.InFlight || bs.RetryAt.IsZero() || bs.Job != ev.Job {
		return
	}
	block, _ := r.Def.Block(ev.Block)
	in.begin(r, block, bs.Attempts+1, o, ev.Now)
}

func handBack(r *Run, ev HandBack, o *Outcome) {
	o.CompleteJob = true
	if r.Status.Terminal() {
		return
	}
	if bs, ok := r.State.Blocks[ev.Block]; ok && bs.Status == BlockRunning && !bs.InFlight && bs.Job == ev.Job {
		bs = o.touch(r, ev.Block)
		bs.Status, bs.RetryAt = BlockPending, time.Time{}
	}
	o.NewJobs, o.JobsAt = 1, ev.At
}
