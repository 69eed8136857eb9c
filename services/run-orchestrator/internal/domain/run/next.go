package run

import (
	"encoding/json"
	"slices"
)

// What runs next. This file is the whole rule; next_test.go tests it alone.
//
// A block runs when every block upstream of it is done (succeeded, failed or skipped) and at
// least one of its incoming edges is taken. An edge is taken when its source succeeded and,
// for an edge with a branch ("true"/"false", out of a condition), when the branch matches the
// source's output.result. A block whose upstream is done but none of whose edges is taken is
// skipped, which in turn can skip its descendants on that path. A block without incoming edges
// (the trigger) is ready at once. Blocks ready together may run in parallel.

// Advance applies the rule to every pending block until nothing changes. It returns the blocks
// now ready, in definition order, and the blocks it skipped (their state changed).
//
// Only a block that changed, or one downstream of a block that changed, can become ready or
// skipped; Advance looks at those alone (the state notes every change), so a step's cost does
// not grow with the run. The first call on a state, and any on a definition built without
// ParseDefinition, looks at every block. A block found ready stays in view until it leaves
// pending.
func (s *State) Advance(d Definition) (ready, skipped []string) {
	look := s.inView(d)
	for changed := true; changed; {
		changed = false
		for _, i := range look {
			id := d.Blocks[i].ID
			if s.status(id) != BlockPending {
				continue
			}
			allDone, taken := s.upstream(d, id)
			if allDone && !taken {
				b, ok := s.Blocks[id]
				if !ok {
					b = &BlockState{}
					s.Blocks[id] = b
				}
				b.Status = BlockSkipped
				skipped = append(skipped, id)
				changed = true
				look = d.withSuccessors(look, id)
			}
		}
	}
	s.recheck = nil
	for _, i := range look {
		id := d.Blocks[i].ID
		if s.status(id) != BlockPending {
			continue
		}
		if allDone, _ := s.upstream(d, id); allDone {
			ready = append(ready, id)
		}
	}
	for _, id := range skipped {
		s.changed(id)
	}
	for _, id := range ready {
		s.changed(id) // still in view next time, whoever takes it
	}
	s.tracked = d.byID != nil
	return ready, skipped
}

// inView lists, in definition order, the indexes of the blocks Advance looks at.
func (s *State) inView(d Definition) []int {
	if !s.tracked || d.byID == nil {
		all := make([]int, len(d.Blocks))
		for i := range all {
			all[i] = i
		}
		return all
	}
	var look []int
	for id := range s.recheck {
		if i, ok := d.byID[id]; ok {
			look = append(look, i)
		}
		for _, to := range d.outgoing[id] {
			look = append(look, d.byID[to])
		}
	}
	slices.Sort(look)
	return slices.Compact(look)
}

// withSuccessors adds the successors of id to the sorted index list look.
func (d Definition) withSuccessors(look []int, id string) []int {
	if d.byID == nil {
		return look // every block is in view already
	}
	for _, to := range d.outgoing[id] {
		look = append(look, d.byID[to])
	}
	slices.Sort(look)
	return slices.Compact(look)
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
