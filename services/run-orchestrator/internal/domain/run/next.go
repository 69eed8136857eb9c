package run

import "encoding/json"

// What runs next (contract §3). This file is the whole rule; next_test.go tests it alone.
//
// A block runs when every block upstream of it is done (succeeded, failed or skipped) and at
// least one of its incoming edges is taken. An edge is taken when its source succeeded and,
// for an edge with a branch ("true"/"false", out of a condition), when the branch matches the
// source's output.result. A block whose upstream is done but none of whose edges is taken is
// skipped, which in turn can skip its descendants on that path. A block without incoming edges
// (the trigger) is ready at once. Blocks ready together may run in parallel.

// Advance applies the rule to every pending block until nothing changes. It returns the blocks
// now ready, in definition order, and the blocks it skipped (their state changed).
func (s *State) Advance(d Definition) (ready, skipped []string) {
	for changed := true; changed; {
		changed = false
		for _, b := range d.Blocks {
			if s.status(b.ID) != BlockPending {
				continue
			}
			allDone, taken := s.upstream(d, b.ID)
			if allDone && !taken {
				s.Block(b.ID).Status = BlockSkipped
				skipped = append(skipped, b.ID)
				changed = true
			}
		}
	}
	for _, b := range d.Blocks {
		if s.status(b.ID) != BlockPending {
			continue
		}
		if allDone, _ := s.upstream(d, b.ID); allDone {
			ready = append(ready, b.ID)
		}
	}
	return ready, skipped
}

// upstream says whether every block upstream of id is done, and whether one of id's incoming
// edges is taken (true for a block without incoming edges).
func (s *State) upstream(d Definition, id string) (allDone, taken bool) {
	in := d.Incoming(id)
	taken = len(in) == 0
	for _, e := range in {
		st := s.status(e.From)
		if !st.Done() {
			return false, taken
		}
		if st == BlockSucceeded && s.edgeTaken(e) {
			taken = true
		}
	}
	return true, taken
}

// edgeTaken says whether an edge out of a block that succeeded is taken: always without a
// branch; with one, when it matches the source's output.result (anything but a JSON true is
// the "false" branch).
func (s *State) edgeTaken(e Edge) bool {
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
