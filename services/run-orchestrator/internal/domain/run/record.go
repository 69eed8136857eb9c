package run

import (
	"encoding/json"
	"time"
)

// NewRun is a run about to be dispatched: the definition pinned, the input checked.
type NewRun struct {
	ID              string
	OrganizationID  string
	WorkflowID      string
	WorkflowVersion int64
	Definition      json.RawMessage
	// Parsed is Definition as ParseDefinition reads it, when the dispatcher has it already
	// (nil: the engine parses Definition itself). It is only read, so runs of one workflow
	// may share it.
	Parsed  *Definition
	Input   json.RawMessage
	Trigger json.RawMessage
	// Group is the run's concurrency group when its pinned definition limits concurrency
	// (nil: no limit, and the run is dispatched as it always was).
	Group *Group
}

// Record is a run as the runs API reads it. It is a read model: the engine alone changes runs,
// under the run's row lock.
type Record struct {
	ID              string
	OrganizationID  string
	WorkflowID      string
	WorkflowVersion int64
	Definition      json.RawMessage
	Status          Status
	Input           json.RawMessage
	Output          json.RawMessage
	Error           json.RawMessage
	Trigger         json.RawMessage
	Waiting         *Waiting
	// Queue says why a queued run is held back (nil: it is not).
	Queue      *Queued
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

// Waiting describes the wait a waiting run is suspended in.
type Waiting struct {
	BlockID string
	Kind    string // "sleep" or "signal"
	Until   time.Time
	Signal  string
}

// Attempt is one step attempt as the logs list it.
type Attempt struct {
	ID         string
	BlockID    string
	Type       string
	Attempt    int
	Status     string
	Seq        int64
	StartedAt  time.Time
	FinishedAt time.Time
	Input      json.RawMessage
	Output     json.RawMessage
	Error      json.RawMessage
}

// ListFilter narrows a run listing; After is the id the previous page ended at.
type ListFilter struct {
	WorkflowID string
	Status     Status
	After      string
	Limit      int
}

// SignalResult is what storing a signal did: Delivered when a wait consumed it at once;
// otherwise it stays buffered, and WaitingFor lists the signal names the run waits for now
// (oldest wait first; empty: no signal wait).
type SignalResult struct {
	ID         string
	Delivered  bool
	WaitingFor []string
}

// Snapshot is a run and its attempts changed after a sequence, read in one transaction: what
// the event stream derives its events from.
type Snapshot struct {
	Run       Record
	ChangeSeq int64
	Attempts  []AttemptChange
	Statuses  []StatusChange
}

// StatusChange is one entry of a run's status log: the status it took at sequence Seq (and
// what it waited for, when waiting). The first, queued at sequence 0, is not stored.
type StatusChange struct {
	Seq     int64
	Status  Status
	Waiting *Waiting
	// Queue is set on a queued status that holds the run back for a slot of its concurrency
	// group; a queued status without it is the run's admission.
	Queue *Queued
	At    time.Time
}

// AttemptChange is an attempt as the event stream reads it: StartedSeq is the change
// sequence it started at (0: not recorded), Seq its latest; RetryAt is set on a failed
// attempt that another attempt follows.
type AttemptChange struct {
	ID, BlockID, Type     string
	Attempt               int
	Status                string
	Seq, StartedSeq       int64
	StartedAt, FinishedAt time.Time
	RetryAt               time.Time
	Error                 json.RawMessage
	OutputBytes           int
}
