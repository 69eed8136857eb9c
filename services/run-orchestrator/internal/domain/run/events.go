package run

import (
	"encoding/json"
	"time"
)

// The events the interpreter takes. Each carries what the outside world knows and the
// interpreter cannot (the time, a buffered signal, which attempts a dead replica held); none
// is read from a clock or a database here.

// Event is one thing that happened to a run.
type Event interface{ event() }

// JobEvent names the worker's job an event comes from, and whether its replica is shutting
// down (the run is then handed back between steps instead of going on here).
type JobEvent struct {
	Job int64
	// Try is the job's try (River's attempt), 1 for the first.
	Try      int
	Stopping bool
	// Yield says the run's organization is to give the worker up between steps: another
	// organization's work is queued ahead of its next turn (the queue shares workers fairly).
	Yield bool
}

// Advance is a job taking the run: a fresh run, a continuation after a wait was released or
// a parallel block's job. A later try of a job takes back the blocks its earlier try held.
type Advance struct {
	JobEvent
	Now time.Time
}

// Succeeded is an attempt's connector returning an output (JSON).
type Succeeded struct {
	JobEvent
	Block, AttemptID string
	Output           json.RawMessage
	// Input is the attempt's params, when its worker resolved them after it began
	// (StartAttempt.Deferred): they replace the input recorded at its start.
	Input json.RawMessage
	Now   time.Time
}

// Failed is an attempt's connector returning an error; Code is "timeout" when the step's
// timeout ended it, expression_budget_exceeded or expression_output_too_large when the
// budget of its expressions did.
type Failed struct {
	JobEvent
	Block, AttemptID string
	Message, Code    string
	Input            json.RawMessage // as Succeeded's
	Now              time.Time
}

// Suspended is a wait block's attempt asking to wait. For a signal wait, Buffered is the
// oldest unconsumed signal of that name stored before the wait began (nil: none).
type Suspended struct {
	JobEvent
	Block, AttemptID string
	Wait             WaitRequest
	Buffered         *Signal
	Input            json.RawMessage // as Succeeded's
	Now              time.Time
}

// WaitRequest is what a wait block asks for: a sleep until WakeAt, or a signal with an
// optional timeout.
type WaitRequest struct {
	Kind    string
	WakeAt  time.Time
	Signal  string
	Timeout time.Duration
}

// RetryDue is the end of a failed block's backoff: its next attempt starts.
type RetryDue struct {
	JobEvent
	Block string
	Now   time.Time
}

// HandBack is a shutting-down replica giving back a block between retries: a fresh job
// continues the run at At, the end of the backoff.
type HandBack struct {
	JobEvent
	Block string
	At    time.Time
}

// AttemptsLost is the sweeper's finding: the attempts in flight on replicas that stopped
// heartbeating, and the jobs of those replicas it finalized (a block such a job held between
// retries goes back to pending too).
type AttemptsLost struct {
	Attempts []LostAttempt
	DeadJobs []int64
	Now      time.Time
}

// LostAttempt is one attempt a dead replica held.
type LostAttempt struct {
	Block, AttemptID, Replica string
}

// TimerFired is the end of a sleep, or of a signal wait's timeout.
type TimerFired struct {
	Block string
	Now   time.Time
}

// SignalArrived is a signal stored for the run (the oldest wait on its name
// consumes it; with none, it stays buffered).
type SignalArrived struct {
	Signal Signal
	Now    time.Time
}

// Signal is a stored signal.
type Signal struct {
	ID, Name string
	Payload  json.RawMessage
}

// CancelRequested is a cancel of the run.
type CancelRequested struct{ Now time.Time }

func (Advance) event()         {}
func (Succeeded) event()       {}
func (Failed) event()          {}
func (Suspended) event()       {}
func (RetryDue) event()        {}
func (HandBack) event()        {}
func (AttemptsLost) event()    {}
func (TimerFired) event()      {}
func (SignalArrived) event()   {}
func (CancelRequested) event() {}
