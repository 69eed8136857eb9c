package run

import (
	"encoding/json"
	"fmt"
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

// BlockState is the interpreter's record of one block.
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
}

// State is the interpreter state stored with the run (runs.state): one entry per block that
// left pending.
type State struct {
	Blocks map[string]*BlockState `json:"blocks"`
}

// ParseState reads a stored state; an empty one is the state of a fresh run.
func ParseState(raw []byte) (State, error) {
	s := State{Blocks: map[string]*BlockState{}}
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

// Block returns the state of id, creating a pending one.
func (s State) Block(id string) *BlockState {
	b, ok := s.Blocks[id]
	if !ok {
		b = &BlockState{}
		s.Blocks[id] = b
	}
	return b
}

// status is the status of id without creating an entry.
func (s State) status(id string) BlockStatus {
	if b, ok := s.Blocks[id]; ok {
		return b.Status
	}
	return BlockPending
}

// Advance applies contract §3's rule to every pending block until nothing changes: a block
// whose upstream blocks are all done runs when at least one incoming edge is taken (an edge
// with a branch is taken only when it matches the source's result) and is skipped otherwise,
// which skips its descendants on that path in turn. It returns the blocks now ready, in
// definition order. Blocks without incoming edges (the trigger) are ready at once.
func (s State) Advance(d Definition) []string {
	for changed := true; changed; {
		changed = false
		for _, b := range d.Blocks {
			if s.status(b.ID) != BlockPending {
				continue
			}
			in := d.Incoming(b.ID)
			allDone, taken := true, len(in) == 0
			for _, e := range in {
				st := s.status(e.From)
				if !st.Done() {
					allDone = false
					break
				}
				if st == BlockSucceeded && s.edgeTaken(e) {
					taken = true
				}
			}
			if allDone && !taken {
				s.Block(b.ID).Status = BlockSkipped
				changed = true
			}
		}
	}
	var ready []string
	for _, b := range d.Blocks {
		if s.status(b.ID) != BlockPending {
			continue
		}
		in := d.Incoming(b.ID)
		ok := true
		for _, e := range in {
			if !s.status(e.From).Done() {
				ok = false
				break
			}
		}
		if ok {
			ready = append(ready, b.ID)
		}
	}
	return ready
}

func (s State) edgeTaken(e Edge) bool {
	if e.Branch == "" {
		return true
	}
	var out struct {
		Result any `json:"result"`
	}
	if b, ok := s.Blocks[e.From]; ok && len(b.Output) > 0 {
		_ = json.Unmarshal(b.Output, &out)
	}
	r, _ := out.Result.(bool)
	return (e.Branch == "true") == r
}

// Active reports whether a block is in flight or suspended.
func (s State) Active() bool {
	for _, b := range s.Blocks {
		if b.Status == BlockRunning || b.Status == BlockWaiting {
			return true
		}
	}
	return false
}

// Waiting reports whether a block is suspended in a wait.
func (s State) Waiting() bool {
	for _, b := range s.Blocks {
		if b.Status == BlockWaiting {
			return true
		}
	}
	return false
}

// Output is the run output: {<block_id>: output} of the sink blocks that ran.
func (s State) Output(d Definition) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, id := range d.Sinks() {
		if b, ok := s.Blocks[id]; ok && b.Status == BlockSucceeded {
			out[id] = b.Output
		}
	}
	return out
}
