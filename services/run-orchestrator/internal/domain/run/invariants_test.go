package run_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The invariant checker every test of the interpreter applies its events through (the fuzz
// target and the property test too). It is long because it restates, independently of the
// interpreter, every invariant of a run's execution that must hold after any Apply.

// ---- the invariant checker ----------------------------------------------------------------

// tracker follows one run through its events and checks, after every Apply, what holds
// whatever the event: sequences only move on, terminal states stay, Changed lists exactly the
// blocks whose state moved, attempts end only after they began, and so on.
type tracker struct {
	blocks     map[string]bool
	changeSeq  int64             // the highest Change.Seq published
	attemptSeq int64             // the highest attempt change's Seq
	begun      map[string]string // attempt id -> block
	ended      map[string]string // attempt id -> status it ended with
	// strictEnds also requires that an attempt ends at most once (the world of the property
	// test only reports attempts the way the engine does).
	strictEnds bool
	events     int
}

func newTracker(r *run.Run) *tracker {
	tr := &tracker{blocks: map[string]bool{}, begun: map[string]string{}, ended: map[string]string{}}
	for _, b := range r.Def.Blocks {
		tr.blocks[b.ID] = true
	}
	return tr
}

// snapshot copies every block's state (what storage would write).
func snapshot(r *run.Run) map[string]run.BlockState {
	out := make(map[string]run.BlockState, len(r.State.Blocks))
	for id, b := range r.State.Blocks {
		c := *b
		if b.Wait != nil {
			w := *b.Wait
			c.Wait = &w
		}
		out[id] = c
	}
	return out
}

// sameBlock says whether two block states store the same (times by instant, an empty output
// as none).
func sameBlock(a, b run.BlockState) bool {
	if a.Status != b.Status || a.Attempts != b.Attempts || a.Lost != b.Lost || a.Job != b.Job || a.AttemptID != b.AttemptID ||
		a.InFlight != b.InFlight || a.Queued != b.Queued || !bytes.Equal(a.Output, b.Output) || !a.RetryAt.Equal(b.RetryAt) || (a.Wait == nil) != (b.Wait == nil) {
		return false
	}
	if a.Wait == nil {
		return true
	}
	x, y := *a.Wait, *b.Wait
	return x.Kind == y.Kind && x.Signal == y.Signal && x.WakeAt.Equal(y.WakeAt) && x.Since.Equal(y.Since) && x.Seq == y.Seq
}

// changedBlocks lists the blocks whose state differs (an absent block is a pending one with
// nothing recorded), sorted.
func changedBlocks(before, after map[string]run.BlockState) []string {
	var out []string
	for id, a := range after {
		if !sameBlock(before[id], a) {
			out = append(out, id)
		}
	}
	for id, b := range before {
		if _, ok := after[id]; !ok && !sameBlock(b, run.BlockState{}) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// sameState says whether two snapshots store the same.
func sameState(before, after map[string]run.BlockState) bool {
	return len(changedBlocks(before, after)) == 0
}

func isJobEvent(ev run.Event) bool {
	switch ev.(type) {
	case run.Advance, run.Succeeded, run.Failed, run.Suspended, run.RetryDue, run.HandBack:
		return true
	}
	return false
}

// apply applies ev to r and returns Apply's outcome, the invariants it broke, and Apply's
// error.
func (tr *tracker) apply(in *run.Interpreter, r *run.Run, ev run.Event) (o run.Outcome, violations []string, applyErr error) {
	before, status, seq := snapshot(r), r.Status, r.Seq
	o, applyErr = in.Apply(r, ev)
	tr.events++
	return o, tr.check(r, ev, o, applyErr, before, status, seq), applyErr
}

func (tr *tracker) check(r *run.Run, ev run.Event, o run.Outcome, applyErr error, before map[string]run.BlockState, status run.Status, seq int64) []string {
	var v []string
	fail := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	after := snapshot(r)

	if applyErr != nil {
		var fe *run.FinishedError
		switch {
		case !errors.As(applyErr, &fe):
			fail("unexpected error %v", applyErr)
		case !status.Terminal() || fe.Status != status:
			fail("FinishedError %v for a run that was %s", applyErr, status)
		}
		if _, ok := ev.(run.SignalArrived); !ok {
			if _, ok := ev.(run.CancelRequested); !ok {
				fail("FinishedError for %T", ev)
			}
		}
		if r.Status != status || r.Seq != seq || !sameState(before, after) {
			fail("an event refused with an error changed the run")
		}
		if !reflect.DeepEqual(o, run.Outcome{}) {
			fail("an event refused with an error has an outcome: %+v", o)
		}
		return v
	}

	// Statuses: valid, terminal ones for good.
	if !r.Status.Valid() {
		fail("invalid run status %q", r.Status)
	}
	if status.Terminal() && r.Status != status {
		fail("terminal status %s changed to %s", status, r.Status)
	}
	if r.Seq < seq {
		fail("run Seq went back from %d to %d", seq, r.Seq)
	}

	// Changes: sequences, kinds, the status change last.
	kinds := map[string]bool{run.ChangeStatus: true, run.ChangeAttemptStarted: true, run.ChangeAttemptFinished: true,
		run.ChangeWaitArmed: true, run.ChangeWaitReleased: true, run.ChangeRetryScheduled: true}
	statusChanges := 0
	for i, c := range o.Changes {
		if !kinds[c.Kind] {
			fail("change %d has unknown kind %q", i, c.Kind)
		}
		if c.RunID != r.ID || c.OrganizationID != r.OrganizationID || c.WorkflowID != r.WorkflowID {
			fail("change %d names run %s/%s/%s", i, c.RunID, c.OrganizationID, c.WorkflowID)
		}
		if c.Seq < tr.changeSeq {
			fail("change %d (%s) has Seq %d after %d", i, c.Kind, c.Seq, tr.changeSeq)
		}
		tr.changeSeq = max(tr.changeSeq, c.Seq)
		if c.Seq > r.Seq {
			fail("change %d (%s) has Seq %d beyond the run's %d", i, c.Kind, c.Seq, r.Seq)
		}
		if c.Kind == run.ChangeAttemptStarted || c.Kind == run.ChangeAttemptFinished {
			if c.Seq <= tr.attemptSeq {
				fail("attempt change %d (%s %s) has Seq %d, not above %d", i, c.Kind, c.AttemptID, c.Seq, tr.attemptSeq)
			}
			tr.attemptSeq = max(tr.attemptSeq, c.Seq)
		}
		if c.Kind == run.ChangeStatus {
			statusChanges++
			if i != len(o.Changes)-1 || c.Status != r.Status || c.Seq != r.Seq {
				fail("run.status change %d of %d: %s at Seq %d (run %s at %d)", i, len(o.Changes), c.Status, c.Seq, r.Status, r.Seq)
			}
			if (c.Status == run.StatusWaiting) != (c.Wait != nil) {
				fail("run.status %s change with wait %v", c.Status, c.Wait)
			}
		}
	}
	wantStatusChanges := 0
	if r.Status != status {
		wantStatusChanges = 1
	}
	if statusChanges != wantStatusChanges {
		fail("%d run.status changes for %s -> %s", statusChanges, status, r.Status)
	}

	// Finish: exactly when the run becomes terminal.
	becameTerminal := r.Status.Terminal() && !status.Terminal()
	if (o.Finish != nil) != becameTerminal {
		fail("Finish %+v for %s -> %s", o.Finish, status, r.Status)
	}
	if o.Finish != nil {
		if o.Finish.Status != r.Status {
			fail("Finish status %s, run %s", o.Finish.Status, r.Status)
		}
		switch o.Finish.Status {
		case run.StatusCompleted:
			var out map[string]json.RawMessage
			if o.Finish.Error != nil || json.Unmarshal(o.Finish.Output, &out) != nil {
				fail("completed with output %s error %s", o.Finish.Output, o.Finish.Error)
			}
			for id := range out {
				if !tr.blocks[id] {
					fail("output names block %s", id)
				}
			}
		case run.StatusFailed:
			var e struct {
				BlockID *string `json:"block_id"`
				Message *string `json:"message"`
			}
			if json.Unmarshal(o.Finish.Error, &e) != nil || e.BlockID == nil || e.Message == nil || !tr.blocks[*e.BlockID] {
				fail("failed with error %s", o.Finish.Error)
			}
		}
		if !o.ReleaseAll {
			fail("a finished run keeps its waits")
		}
	}

	// Changed: blocks of the definition, once each, exactly those whose state moved.
	seen := map[string]bool{}
	for _, id := range o.Changed {
		if seen[id] {
			fail("Changed lists %s twice", id)
		}
		seen[id] = true
		if !tr.blocks[id] {
			fail("Changed lists %s, not a block of the definition", id)
		}
	}
	got := slices.Clone(o.Changed)
	slices.Sort(got)
	if want := changedBlocks(before, after); !slices.Equal(got, want) {
		fail("Changed %v, but the blocks whose state changed are %v", o.Changed, want)
	}

	// Block states.
	for id, b := range r.State.Blocks {
		if !b.Status.Valid() {
			fail("block %s has status %q", id, b.Status)
		}
		if b.InFlight && b.Status != run.BlockRunning && b.Status != run.BlockWaiting {
			fail("block %s in flight while %q", id, b.Status)
		}
		if b.Status == run.BlockWaiting && b.Wait == nil {
			fail("block %s waiting for nothing", id)
		}
		if b.Attempts > run.MaxAttemptsAnyKind {
			fail("block %s has %d attempts", id, b.Attempts)
		}
		if !b.RetryAt.IsZero() && (b.Status != run.BlockRunning || b.InFlight) {
			fail("block %s has a retry due while %q (in flight %v)", id, b.Status, b.InFlight)
		}
		if r.Status.Terminal() && b.InFlight {
			fail("run %s but block %s is in flight", r.Status, id)
		}
	}
	if r.Status == run.StatusWaiting {
		waiting, running := 0, 0
		for _, b := range r.State.Blocks {
			switch b.Status {
			case run.BlockWaiting:
				waiting++
			case run.BlockRunning:
				running++
			}
		}
		if waiting == 0 || running > 0 {
			fail("run waiting with %d blocks waiting and %d running", waiting, running)
		}
	}
	if r.Status.Terminal() && (o.Start != nil || o.NewJobs != 0 || o.Retry != nil || len(o.Armed) != 0) {
		fail("run %s yet the outcome starts something: %+v", r.Status, o)
	}

	// Start and Begun.
	if len(o.Begun) > 1 || (o.Start != nil) != (len(o.Begun) == 1) || (o.Start != nil && o.Start.ID != o.Begun[0].ID) {
		fail("Start %+v with Begun %+v", o.Start, o.Begun)
	}
	if o.Start != nil {
		st := o.Start
		if !isJobEvent(ev) {
			fail("%T starts an attempt", ev)
		}
		if _, dup := tr.begun[st.ID]; dup {
			fail("attempt id %s begun twice", st.ID)
		}
		tr.begun[st.ID] = st.Block.ID
		b := r.State.Blocks[st.Block.ID]
		if !tr.blocks[st.Block.ID] || b == nil || b.Status != run.BlockRunning || !b.InFlight || b.AttemptID != st.ID || b.Attempts != st.Attempt {
			fail("started %s attempt %d (%s) but the block is %+v", st.Block.ID, st.Attempt, st.ID, b)
		}
		found := false
		for _, c := range o.Changes {
			found = found || (c.Kind == run.ChangeAttemptStarted && c.AttemptID == st.ID && c.Seq == st.Seq && c.Attempt == st.Attempt)
		}
		if !found {
			fail("no attempt.started change for %s at Seq %d", st.ID, st.Seq)
		}
	}

	// Ended.
	for _, e := range o.Ended {
		block, ok := tr.begun[e.ID]
		if !ok {
			fail("attempt %s ended (%s) but never begun", e.ID, e.Status)
		} else if block != e.Block {
			fail("attempt %s of %s ended as one of %s", e.ID, block, e.Block)
		}
		if prev, done := tr.ended[e.ID]; done && tr.strictEnds {
			fail("attempt %s ended %s after it had ended %s", e.ID, e.Status, prev)
		}
		tr.ended[e.ID] = e.Status
		switch e.Status {
		case "succeeded", "failed", "cancelled", "lost":
		default:
			fail("attempt %s ended with status %q", e.ID, e.Status)
		}
		found := false
		for _, c := range o.Changes {
			found = found || (c.Kind == run.ChangeAttemptFinished && c.AttemptID == e.ID && c.Seq == e.Seq && c.AttemptStatus == e.Status)
		}
		if !found {
			fail("no attempt.finished change for %s at Seq %d", e.ID, e.Seq)
		}
	}

	// Retries, waits, signals.
	if o.Retry != nil {
		b := r.State.Blocks[o.Retry.Block]
		if b == nil || b.Status != run.BlockRunning || b.InFlight || !b.RetryAt.Equal(o.Retry.At) || b.Attempts+1 != o.Retry.Attempt {
			fail("retry %+v of block %+v", o.Retry, b)
		}
		if o.Start != nil {
			fail("an outcome both starts and retries")
		}
	}
	for _, a := range o.Armed {
		if b := r.State.Blocks[a.Block]; !r.Status.Terminal() && (b == nil || b.Status != run.BlockWaiting || b.AttemptID != a.AttemptID) {
			fail("armed wait %+v but the block is %+v", a, b)
		}
	}
	for _, id := range o.Released {
		if b := r.State.Blocks[id]; b == nil || b.Status != run.BlockSucceeded {
			fail("released %s but the block is %+v", id, b)
		}
	}
	if _, ok := ev.(run.SignalArrived); !ok && o.Delivered {
		fail("%T delivered a signal", ev)
	}
	if o.Delivered && (o.Consume == nil || len(o.Released) != 1) {
		fail("delivered without consume/release: %+v", o)
	}
	return v
}
