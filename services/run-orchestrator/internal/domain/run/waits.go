package run

import (
	"encoding/json"
	"slices"
	"time"
)

// Waits: a wait block suspends its path until a time (sleep), a signal, or a signal's
// timeout. The block's attempt stays in flight while it waits; its release ends the attempt
// with the wait's output and a fresh job continues the run.

func (in *Interpreter) suspended(r *Run, ev Suspended, o *Outcome) {
	if !inFlight(r, ev.Job, ev.Block, ev.AttemptID) {
		return
	}
	recordInput(o, ev.AttemptID, ev.Input)
	w := Wait{Kind: ev.Wait.Kind, Since: ev.Now, Seq: r.Seq}
	switch ev.Wait.Kind {
	case WaitSignal:
		w.Signal = ev.Wait.Signal
		if ev.Buffered != nil {
			// A signal stored before the wait began: consumed at once.
			o.Consume = &Consume{SignalID: ev.Buffered.ID, AttemptID: ev.AttemptID}
			succeed(r, o, ev.Block, SignalOutput(w.Signal, ev.Buffered.Payload), ev.Now)
			in.proceed(r, ev.JobEvent, ev.Now, o)
			return
		}
		if ev.Wait.Timeout > 0 {
			w.WakeAt = ev.Now.Add(ev.Wait.Timeout)
		}
	default:
		w.Kind, w.WakeAt = WaitSleep, ev.Wait.WakeAt
	}
	bs := o.touch(r, ev.Block)
	bs.Status, bs.Wait = BlockWaiting, &w
	o.Armed = append(o.Armed, ArmedWait{Block: ev.Block, AttemptID: ev.AttemptID, Wait: w})
	o.change(r, Change{Kind: ChangeWaitArmed, BlockID: ev.Block, AttemptID: ev.AttemptID, Wait: &w}, ev.Now)
	in.proceed(r, ev.JobEvent, ev.Now, o)
}

// release ends a waiting block's wait with output, and a fresh job continues the run.
func release(r *Run, o *Outcome, block string, output json.RawMessage, now time.Time) {
	bs := r.State.Blocks[block]
	o.Released = append(o.Released, block)
	o.change(r, Change{Kind: ChangeWaitReleased, BlockID: block, AttemptID: bs.AttemptID, Wait: bs.Wait}, now)
	succeed(r, o, block, output, now)
	r.Status = StatusRunning
	o.NewJobs++
}

func timerFired(r *Run, ev TimerFired, o *Outcome) {
	bs, ok := r.State.Blocks[ev.Block]
	if r.Status.Terminal() || !ok || bs.Status != BlockWaiting || bs.Wait == nil || bs.Wait.WakeAt.IsZero() {
		return
	}
	out := json.RawMessage(`{"timed_out":true}`)
	if bs.Wait.Kind == WaitSleep {
		out, _ = json.Marshal(map[string]any{"slept_ms": max(ev.Now.Sub(bs.Wait.Since).Milliseconds(), 0)})
	}
	release(r, o, ev.Block, out, ev.Now)
}

func signalArrived(r *Run, ev SignalArrived, o *Outcome) {
	block := ""
	var oldest *Wait
	for _, id := range r.Def.order(r.State) {
		bs := r.State.Blocks[id]
		if bs.Status == BlockWaiting && bs.Wait != nil && bs.Wait.Kind == WaitSignal && bs.Wait.Signal == ev.Signal.Name &&
			(oldest == nil || bs.Wait.before(oldest)) {
			block, oldest = id, bs.Wait
		}
	}
	if block == "" {
		return // buffered: a later wait on the name consumes it
	}
	o.Consume = &Consume{SignalID: ev.Signal.ID, AttemptID: r.State.Blocks[block].AttemptID}
	o.Delivered = true
	release(r, o, block, SignalOutput(ev.Signal.Name, ev.Signal.Payload), ev.Now)
}

// SignalOutput is a signal wait's output. The payload goes in as stored, never re-decoded: a
// value a decoder could not hold would otherwise become null without a word.
func SignalOutput(name string, payload json.RawMessage) json.RawMessage {
	p := json.RawMessage("null")
	if len(payload) > 0 && json.Valid(payload) {
		p = payload
	}
	out, _ := json.Marshal(map[string]any{"signal": map[string]any{"name": name, "payload": p}})
	return out
}

// before reports whether wait w began before wait x: by the run's change sequence, then (two
// waits armed with no attempt change between them share it) by the time each began.
func (w *Wait) before(x *Wait) bool {
	if w.Seq != x.Seq {
		return w.Seq < x.Seq
	}
	return w.Since.Before(x.Since)
}

// SignalWaits lists the signal names the run's waits wait for now, oldest wait first.
func (r *Run) SignalWaits() []string {
	var waits []*Wait
	for _, id := range r.Def.order(r.State) {
		if b := r.State.Blocks[id]; b.Status == BlockWaiting && b.Wait != nil && b.Wait.Kind == WaitSignal {
			waits = append(waits, b.Wait)
		}
	}
	slices.SortStableFunc(waits, func(a, b *Wait) int {
		if a.before(b) {
			return -1
		}
		if b.before(a) {
			return 1
		}
		return 0
	})
	names := make([]string, len(waits))
	for i, w := range waits {
		names[i] = w.Signal
	}
	return names
}
