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
	// connector's max_attempts, Attempts (every kind) does against the cap of 10.
	Lost   int             `json:"lost,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	// Job is the River job whose worker holds the block while it is running: a later try of
	// that same job finds the block still running only when its earlier try ended mid-step.
	Job int64 `json:"job,omitempty"`
	// AttemptID is the block's latest attempt; InFlight says it is still running (a
	// connector call, or a wait that has not been released).
	AttemptID string `json:"attempt_id,omitempty"`
	InFlight  bool   `json:"in_flight,omitempty"`
	// Queued says a job was queued for the block while it is ready (pending): it is not
	// queued again.
	Queued bool `json:"queued,omitempty"`
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

// State is the interpreter state of a run: one entry per block that left pending. Besides the
// blocks it keeps two caches that make a step's cost independent of the run's size: the
// template scope's steps.<id> entries, and the blocks Advance must look at again.
type State struct {
	Blocks map[string]*BlockState `json:"blocks"`
	// steps is the scope's steps map ({"output": decoded output} of every block that
	// succeeded); stale lists the blocks changed since it was brought up to date. nil: build.
	steps map[string]any
	stale map[string]bool
	// recheck lists the blocks changed since Advance last ran; tracked says Advance has seen
	// every block since (false: it looks at all of them).
	recheck map[string]bool
	tracked bool
}

// NewState is the state of a run no block of which has started.
func NewState() State {
	return State{Blocks: map[string]*BlockState{}}
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
	return s, nil
}

// Block returns the state of id for a change, creating a pending one.
func (s *State) Block(id string) *BlockState {
	b, ok := s.Blocks[id]
	if !ok {
		b = &BlockState{}
		s.Blocks[id] = b
	}
	s.changed(id)
	return b
}

// Put replaces the state of id, as storage read it.
func (s *State) Put(id string, b *BlockState) {
	s.Blocks[id] = b
	s.changed(id)
}

// changed notes that block id may have changed, for the caches.
func (s *State) changed(id string) {
	if s.recheck == nil {
		s.recheck = map[string]bool{}
	}
	s.recheck[id] = true
	if s.steps != nil {
		if s.stale == nil {
			s.stale = map[string]bool{}
		}
		s.stale[id] = true
	}
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

// scopeSteps is the template scope's steps map: {"output": decoded output} of every block
// that succeeded. It is kept up to date block by block, never rebuilt whole after the first
// use; readers must not change it.
func (s *State) scopeSteps() map[string]any {
	if s.steps == nil {
		s.steps = make(map[string]any, len(s.Blocks))
		for id, b := range s.Blocks {
			if b.Status == BlockSucceeded {
				s.steps[id] = stepScope(b)
			}
		}
		s.stale = nil
		return s.steps
	}
	s.refresh()
	return s.steps
}

func (s *State) refresh() {
	for id := range s.stale {
		if b, ok := s.Blocks[id]; ok && b.Status == BlockSucceeded {
			s.steps[id] = stepScope(b)
		} else {
			delete(s.steps, id)
		}
	}
	s.stale = nil
}

func stepScope(b *BlockState) map[string]any {
	var out any
	_ = json.Unmarshal(b.Output, &out)
	return map[string]any{"output": out}
}
