package run

import (
	"encoding/json"
	"fmt"
	"time"
)

// How attempts and runs end: attempts lost with a replica, a cancel, a run's finish.

func attemptsLost(r *Run, ev AttemptsLost, o *Outcome) {
	dead := map[int64]bool{}
	for _, j := range ev.DeadJobs {
		dead[j] = true
	}
	stopped := ""
	for _, a := range ev.Attempts {
		if bs, ok := r.State.Blocks[a.Block]; !ok || bs.AttemptID != a.AttemptID || !bs.InFlight {
			continue // not in flight any more: it has ended already
		}
		bs := o.touch(r, a.Block)
		bs.Lost++
		if bs.Status == BlockWaiting { // its wait is gone with the attempt: the block runs again
			bs.Wait = nil
			o.Released = append(o.Released, a.Block)
		}
		bs.Status = BlockPending
		if bs.Attempts >= MaxAttemptsAnyKind && !r.Status.Terminal() {
			bs.Status, stopped = BlockFailed, a.Block
		}
		endAttemptID(r, o, a.Block, a.AttemptID, "lost", nil, errorBody("replica "+a.Replica+" stopped heartbeating", CodeLost), ev.Now)
	}
	// A job queued for a ready block may be one of the dead jobs (fetched, not yet begun):
	// the marks are cleared, and the next job to proceed queues for those blocks again.
	if len(ev.DeadJobs) > 0 {
		for _, id := range r.Def.order(r.State) {
			if r.State.Blocks[id].Queued {
				o.touch(r, id).Queued = false
			}
		}
	}
	// Blocks between retries whose backoff ran on a dead replica hold no attempt in flight;
	// the dead job is finalized, so they go back to pending too.
	for _, id := range r.Def.order(r.State) {
		bs := r.State.Blocks[id]
		if bs.Status == BlockRunning && !bs.InFlight && dead[bs.Job] {
			bs = o.touch(r, id)
			bs.Status, bs.RetryAt = BlockPending, time.Time{}
		}
	}
	if len(ev.Attempts) == 0 && len(ev.DeadJobs) == 0 || r.Status.Terminal() {
		return
	}
	if stopped != "" {
		finish(r, o, StatusFailed, stopped, fmt.Sprintf("step stopped after %d attempts (the last was lost: its replica stopped heartbeating)", MaxAttemptsAnyKind), ev.Now)
		return
	}
	r.Status = StatusRunning
	o.NewJobs++
}

func cancel(r *Run, ev CancelRequested, o *Outcome) {
	finish(r, o, StatusCancelled, "", "", ev.Now)
	o.CancelJobs = true
}

// ---- endings ------------------------------------------------------------------------------

// endAttempt ends the block's attempt in flight.
func endAttempt(r *Run, o *Outcome, block, status string, output, errBody json.RawMessage, now time.Time) {
	endAttemptID(r, o, block, r.State.Blocks[block].AttemptID, status, output, errBody, now)
}

// endAttemptID records attempt id of block ended; it is no longer in flight when it is the
// block's latest.
func endAttemptID(r *Run, o *Outcome, block, id, status string, output, errBody json.RawMessage, now time.Time) {
	bs := o.touch(r, block)
	if bs.AttemptID == id {
		bs.InFlight = false
	}
	r.Seq++
	o.Ended = append(o.Ended, EndedAttempt{ID: id, Block: block, Status: status, Output: output, Error: errBody, Seq: r.Seq})
	o.change(r, Change{Kind: ChangeAttemptFinished, Seq: r.Seq, BlockID: block, AttemptID: id, Attempt: bs.Attempts,
		AttemptStatus: status, Error: errBody, OutputBytes: len(output)}, now)
}

func errorBody(message, code string) json.RawMessage {
	body := map[string]any{"message": message}
	if code != "" {
		body["code"] = code
	}
	b, _ := json.Marshal(body)
	return b
}

// finishCompleted ends a run none of whose blocks is active: its output is its sinks'.
func finishCompleted(r *Run, o *Outcome, sinks map[string]json.RawMessage) {
	out, _ := json.Marshal(sinks)
	r.Status = StatusCompleted
	o.Finish = &Finish{Status: StatusCompleted, Output: out}
	o.ReleaseAll = true
}

// finish ends the run failed (error {block_id, message}) or cancelled. Its waits end with it,
// and every attempt still in flight (a step on any replica, or a wait) is recorded cancelled
// in the same commit: the replica running a step drops its result on finding the run
// terminal. Blocks between retries stop there.
func finish(r *Run, o *Outcome, status Status, block, message string, now time.Time) {
	r.Status = status
	o.Finish = &Finish{Status: status}
	if status == StatusFailed {
		o.Finish.Error, _ = json.Marshal(map[string]any{"block_id": block, "message": message})
	}
	o.ReleaseAll = true
	for _, id := range r.Def.order(r.State) {
		bs := r.State.Blocks[id]
		if bs.InFlight {
			endAttempt(r, o, id, "cancelled", nil, errorBody("run "+string(status), ""), now)
		}
		if !bs.RetryAt.IsZero() {
			o.touch(r, id).RetryAt = time.Time{}
		}
	}
}
