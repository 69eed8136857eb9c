package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"svc.dev/proto/connectors/expression"
)

// Outcome is what the interpreter decided for one event: the writes the run's transaction
// makes, and the changes published once it has committed. The run the event was applied to
// holds the new state; Changed lists the blocks whose state moved, which is all storage
// writes.
type Outcome struct {
	// Start is the attempt the acting job runs next (a job runs one block at a time).
	Start *StartAttempt
	// Begun are the attempts whose rows are inserted (status running): Start's.
	Begun []StartAttempt
	// Ended are attempts recorded as finished.
	Ended []EndedAttempt
	// Armed are waits to store (and, when they have a WakeAt, to arm a timer for); Released
	// are blocks whose wait is over; ReleaseAll ends every wait of the run.
	Armed      []ArmedWait
	Released   []string
	ReleaseAll bool
	// Retry is a failed block's next attempt, due At; the acting job keeps the run meanwhile.
	Retry *Retry
	// Consume marks a stored signal consumed by an attempt.
	Consume *Consume
	// NewJobs is how many jobs continue the run (parallel blocks, a released wait, a run
	// handed back), due at JobsAt (zero: at once).
	NewJobs int
	JobsAt  time.Time
	// CancelJobs cancels every job of the run; CompleteJob completes the acting one.
	CancelJobs  bool
	CompleteJob bool
	// Finish is the run's end.
	Finish *Finish
	// Delivered says a SignalArrived released a wait.
	Delivered bool
	// Inputs replace the recorded input of attempts whose params were resolved after they
	// began.
	Inputs []AttemptInput
	// Changed are the blocks whose state changed, in the order they changed.
	Changed []string
	// Changes are the run's changes, in order, to publish after the commit.
	Changes []Change

	changed map[string]bool
}

// StartAttempt is an attempt about to run: its row is committed before the connector runs.
type StartAttempt struct {
	ID      string
	Block   Block
	Attempt int
	Seq     int64
	// Params are the block's params with templates resolved; ParamErr is why a param could
	// not be resolved (the attempt then fails with it, and retries by the connector's policy).
	Params   map[string]any
	ParamErr error
	// Scope is the template scope the params were resolved in (a condition evaluates its
	// expression in it). It shares the run's caches: use it before the run's next Apply.
	Scope map[string]any
	// Deferred says the params went over the inline budget when the attempt began: Params are
	// the block's as written, and the attempt is not run inline; its worker resolves them
	// under the full budget outside any transaction (Prepare). Resolved says Prepare did: the
	// attempt's result carries them, to replace the recorded input (Input, their JSON).
	Deferred, Resolved bool
	Input              json.RawMessage

	in     *Interpreter
	budget *expression.Budget
}

// Prepare readies the attempt to run outside any transaction, under the full budget:
// deferred params are resolved again, and what the connector evaluates itself (a
// condition's expression) gets the full budget, less what the params spent. Use it, as Scope,
// before the run's next Apply.
func (st StartAttempt) Prepare() StartAttempt {
	if st.in == nil || st.budget == nil {
		return st
	}
	full := st.in.templates.limits.Full
	if !st.Deferred {
		st.budget = st.budget.Widen(full)
		return st
	}
	st.budget = expression.NewBudget(full)
	st.Params, st.ParamErr = st.in.resolve(st.Block, st.Scope, st.budget)
	st.Deferred, st.Resolved = false, true
	if st.ParamErr != nil {
		return st
	}
	// The resolved params are recorded as the attempt's input, and read back with its logs:
	// they are held to the attempt's bound, as its output is, before the connector runs (the
	// full budget lets an evaluation produce far more).
	raw, err := json.Marshal(st.Params)
	switch bound := st.in.limits.AttemptOutput; {
	case err != nil:
		st.ParamErr = fmt.Errorf("the resolved params are not JSON: %w", err)
	case len(raw) > bound:
		st.ParamErr = &expression.LimitError{Code: CodeOutputTooLarge, Message: fmt.Sprintf(
			"the resolved params are %d bytes of JSON, over the bound of %d bytes per attempt (SVC_ATTEMPT_OUTPUT_MAX_BYTES); "+
				"keep large data outside the run and pass a reference to it", len(raw), bound)}
	default:
		st.Input = raw
	}
	return st
}

// Eval evaluates the expression src in scope under the attempt's budget (a condition's
// expression).
func (st StartAttempt) Eval(src string, scope map[string]any) (any, error) {
	if st.in == nil || st.budget == nil {
		return nil, errors.New("run: the attempt has no evaluation budget")
	}
	return st.in.templates.Eval(src, scope, st.budget)
}

// AttemptInput is an attempt's input resolved after it began.
type AttemptInput struct {
	ID    string
	Input json.RawMessage
}

// EndedAttempt is an attempt's end: succeeded, failed, cancelled or lost.
type EndedAttempt struct {
	ID, Block, Status string
	Output            json.RawMessage
	Error             json.RawMessage
	Seq               int64
}

// ArmedWait is a wait to store.
type ArmedWait struct {
	Block, AttemptID string
	Wait             Wait
}

// Retry is a block's next attempt after a backoff.
type Retry struct {
	Block   string
	Attempt int
	At      time.Time
}

// Consume marks signal SignalID consumed by attempt AttemptID.
type Consume struct{ SignalID, AttemptID string }

// Finish is the run's terminal status with its output (completed) or error (failed).
type Finish struct {
	Status Status
	Output json.RawMessage
	Error  json.RawMessage
}

// Change kinds: every committed change of a run is one of these.
const (
	ChangeStatus          = "run.status"
	ChangeAttemptStarted  = "attempt.started"
	ChangeAttemptFinished = "attempt.finished"
	ChangeWaitArmed       = "wait.armed"
	ChangeWaitReleased    = "wait.released"
	ChangeRetryScheduled  = "retry.scheduled"
)

// Change is one committed change of a run, as the event feed publishes it. Seq is the run's
// change sequence (the logs cursor) at the change: an attempt's change takes the sequence its
// row is stored with, a status change one of its own (the status log's); the other kinds
// carry the sequence of the latest change before them.
type Change struct {
	Kind                  string
	Seq                   int64
	RunID, OrganizationID string
	WorkflowID            string
	Status                Status          `json:",omitempty"`
	BlockID, AttemptID    string          `json:",omitempty"`
	Attempt               int             `json:",omitempty"`
	AttemptStatus         string          `json:",omitempty"`
	Error                 json.RawMessage `json:",omitempty"`
	OutputBytes           int             `json:",omitempty"`
	Wait                  *Wait           `json:",omitempty"`
	RetryAt               time.Time       `json:",omitzero"`
	At                    time.Time
}

// Then appends next, the outcome of an event applied to the same run after o's in the same
// transaction (an inline block's result: see Fuse), so that one commit carries both: rows and
// changes in order, the later run-wide decisions (the attempt to start, a retry, the run's
// end, the job's completion) taking over the earlier ones.
func (o *Outcome) Then(next Outcome) {
	o.Start, o.Retry = next.Start, next.Retry
	o.Begun = append(o.Begun, next.Begun...)
	o.Ended = append(o.Ended, next.Ended...)
	o.Inputs = append(o.Inputs, next.Inputs...)
	o.Armed = append(o.Armed, next.Armed...)
	o.Released = append(o.Released, next.Released...)
	o.ReleaseAll = o.ReleaseAll || next.ReleaseAll
	if next.Consume != nil {
		o.Consume = next.Consume
	}
	o.NewJobs += next.NewJobs
	if !next.JobsAt.IsZero() {
		o.JobsAt = next.JobsAt
	}
	o.CancelJobs = o.CancelJobs || next.CancelJobs
	o.CompleteJob = next.CompleteJob
	if next.Finish != nil {
		o.Finish = next.Finish
	}
	o.Delivered = o.Delivered || next.Delivered
	if o.changed == nil {
		o.changed = map[string]bool{}
		for _, id := range o.Changed {
			o.changed[id] = true
		}
	}
	for _, id := range next.Changed {
		if !o.changed[id] {
			o.changed[id] = true
			o.Changed = append(o.Changed, id)
		}
	}
	o.Changes = append(o.Changes, next.Changes...)
}

// Fusable says whether another event may be applied after o in o's transaction: o starts an
// attempt, and consumed no signal (a commit consumes at most one).
func (o *Outcome) Fusable() bool { return o.Start != nil && o.Consume == nil && o.Retry == nil }

// touch returns the state of block id and records that it changed.
func (o *Outcome) touch(r *Run, id string) *BlockState {
	if o.changed == nil {
		o.changed = map[string]bool{}
	}
	if !o.changed[id] {
		o.changed[id] = true
		o.Changed = append(o.Changed, id)
	}
	return r.State.Block(id)
}

// change records a change of r.
func (o *Outcome) change(r *Run, c Change, at time.Time) {
	c.RunID, c.OrganizationID, c.WorkflowID, c.At = r.ID, r.OrganizationID, r.WorkflowID, at
	if c.Seq == 0 {
		c.Seq = r.Seq
	}
	o.Changes = append(o.Changes, c)
}
