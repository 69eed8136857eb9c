package run

import (
	"encoding/json"
	"fmt"
	"time"
)

// BlockStatus is where one block of a run stands.
type BlockStatus string

// The block states the interpreter keeps. A block is pending until it is ready or skipped;
// running while an attempt is in flight (or between retries); waiting while a wait block is
// suspended; then succeeded, failed or skipped for good.
const (
	BlockPending   BlockStatus = ""
	BlockRunning   BlockStatus = "running"
	BlockWaiting   BlockStatus = "waiting"
	BlockSucceeded BlockStatus = "succeeded"
	BlockFailed    BlockStatus = "failed"
	BlockSkipped   BlockStatus = "skipped"
)

// Done reports whether the block will never run again.
func (s BlockStatus) Done() bool {
	return s == BlockSucceeded || s == BlockFailed || s == BlockSkipped
}

// Valid reports whether s is one of the block states.
func (s BlockStatus) Valid() bool {
	switch s {
	case BlockPending, BlockRunning, BlockWaiting, BlockSucceeded, BlockFailed, BlockSkipped:
		return true
	}
	return false
}

// BlockState is the interpreter's record of one block (one row of orchestrator.run_blocks).
type BlockState struct {
	Status   BlockStatus `json:"status,omitempty"`
	Attempts int         `json:"attempts,omitempty"`
	// Lost counts the attempts a replica lost by crashing; they do not count against the
	// connector's max_attempts (contract §3), Attempts (every kind) does against the cap of 10.
	Lost   int             `json:"lost,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	// Job is the River job whose worker holds the block while it is running: a later try of
	// that same job finds the block still running only when its earlier try ended mid-step.
	Job int64 `json:"job,omitempty"`
	// AttemptID is the block's latest attempt; InFlight says it is still running (a
	// connector call, or a wait that has not been released).
	AttemptID string `json:"attempt_id,omitempty"`
	InFlight  bool   `json:"in_flight,omitempty"`
	// RetryAt is set while the block is between a failed attempt and its retry.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Wait is what a waiting block waits for.
	Wait *Wait `json:"wait,omitempty"`
}

// Wait is a suspension of a wait block: a sleep until WakeAt, or a signal (with an optional
// timeout at WakeAt). Since is when it began; Seq the run's change sequence then, which orders
// two waits on the same signal.
type Wait struct {
	Kind   string    `json:"kind"`
	Signal string    `json:"signal,omitempty"`
	WakeAt time.Time `json:"wake_at,omitzero"`
	Since  time.Time `json:"since"`
	Seq    int64     `json:"seq"`
}

// Wait kinds.
const (
	WaitSleep  = "sleep"
	WaitSignal = "signal"
)

// State is the interpreter state of a run: one entry per block that left pending.
type State struct {
	Blocks map[string]*BlockState `json:"blocks"`
	// decoded caches the blocks' outputs decoded for templates; outputs never change once a
	// block has succeeded.
	decoded map[string]any
}

// NewState is the state of a run no block of which has started.
func NewState() State {
	return State{Blocks: map[string]*BlockState{}, decoded: map[string]any{}}
}

// ParseState reads a state stored as one JSON document (the form runs.state had before
// per-block storage); an empty one is the state of a fresh run.
func ParseState(raw []byte) (State, error) {
	s := NewState()
	if len(raw) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return State{}, fmt.Errorf("parse run state: %w", err)
	}
	if s.Blocks == nil {
		s.Blocks = map[string]*BlockState{}
	}
	s.decoded = map[string]any{}
	return s, nil
}

// Block returns the state of id, creating a pending one.
func (s *State) Block(id string) *BlockState {
	b, ok := s.Blocks[id]
	if !ok {
		b = &BlockState{}
		s.Blocks[id] = b
	}
	return b
}

// Put replaces the state of id, as storage read it.
func (s *State) Put(id string, b *BlockState) {
	s.Blocks[id] = b
	delete(s.decoded, id)
}

// status is the status of id without creating an entry.
func (s *State) status(id string) BlockStatus {
	if b, ok := s.Blocks[id]; ok {
		return b.Status
	}
	return BlockPending
}

// Active reports whether a block is in flight or suspended.
func (s *State) Active() bool {
	for _, b := range s.Blocks {
		if b.Status == BlockRunning || b.Status == BlockWaiting {
			return true
		}
	}
	return false
}

// count tells how many blocks stand at status.
func (s *State) count(status BlockStatus) int {
	n := 0
	for _, b := range s.Blocks {
		if b.Status == status {
			n++
		}
	}
	return n
}

// Output is the run output: {<block_id>: output} of the sink blocks that ran.
func (s *State) Output(d Definition) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, id := range d.Sinks() {
		if b, ok := s.Blocks[id]; ok && b.Status == BlockSucceeded {
			out[id] = b.Output
		}
	}
	return out
}

// output is the decoded output of a block that succeeded, for templates.
func (s *State) output(id string, b *BlockState) any {
	if s.decoded == nil {
		s.decoded = map[string]any{}
	}
	out, ok := s.decoded[id]
	if !ok {
		_ = json.Unmarshal(b.Output, &out)
		s.decoded[id] = out
	}
	return out
}
