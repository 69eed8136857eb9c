package run_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// This file is long (over 700 lines) for a reason: it is one property test with everything it
// needs beside it — the random definitions, the simulated world that answers the outcomes, the
// disruptions and the end-of-run checks — which only make sense read together.

// TestPropertyEveryRunEnds: for random definitions, a simulated world delivers the events the
// outcomes ask for, in a random order (every Start is answered by the block's connector, every
// NewJobs becomes an Advance, every Retry a RetryDue or, from a stopping replica, a HandBack,
// every wait with a WakeAt fires, a signal is sent for every signal wait), mixed with a
// bounded number of disruptions (crashed replicas, failed tries of a job, cancels, stopping
// replicas, stray signals, replays of stale results). The run must reach a terminal status
// within a bounded number of events, and never be in a state that waits for nothing (not
// terminal, nothing pending in the world, no signal wait a signal could release). The
// invariants of tracker.check hold after every event; at the end every attempt begun has
// ended, and a completed run's output is its sinks that ran.
func TestPropertyEveryRunEnds(t *testing.T) {
	t.Parallel()
	const runs = 4000
	var events, disruptions, longest int
	finals := map[run.Status]int{}
	for seed := range uint64(runs) {
		c := randChooser{rand.New(rand.NewPCG(seed, 0x5eed))}
		w := newWorld(c, genDefinition(c), worldConfig{maxEvents: 2000, disruptions: c.intn(5), extras: c.intn(6)})
		if err := w.run(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		events += w.tr.events
		longest = max(longest, w.endedAt)
		disruptions += w.disrupted
		finals[w.r.Status]++
	}
	t.Logf("%d random runs, %d events applied (%d disruptions; the longest run ended after %d events); final statuses %v", runs, events, disruptions, longest, finals)
}

// ---- the simulated world ------------------------------------------------------------------------

type worldConfig struct {
	// arbitrary also applies events made up from the choices alone, which the engine would not
	// send (fuzz). Once one of them has changed the run, the world's bookkeeping may be off:
	// liveness is no longer checked, only the invariants.
	arbitrary bool
	maxEvents int
	// disruptions bounds crashes, failed tries and cancels; extras bounds stopping replicas,
	// stray signals and replays (which cannot keep a run from ending).
	disruptions, extras int
}

type jobPhase int

const (
	jobQueued  jobPhase = iota // its Advance is due at
	jobRunning                 // its attempt (start) runs
	jobBackoff                 // it holds retry
)

// wjob is one River job of the run.
type wjob struct {
	id       int64
	try      int
	phase    jobPhase
	at       time.Time
	start    run.StartAttempt
	retry    run.Retry
	stopping bool
}

type wsignal struct {
	sig      run.Signal
	consumed bool
}

type world struct {
	c     chooser
	cfg   worldConfig
	in    *run.Interpreter
	r     *run.Run
	tr    *tracker
	now   time.Time
	jobs  map[int64]*wjob
	next  int64
	timer map[string]time.Time
	sigs  []*wsignal
	// replayable are results and timers already delivered: delivered again they must change
	// nothing.
	replayable []run.Event
	begun      []run.StartAttempt
	// bound is how many events the run may take to end: per block 10 attempts of 4 events
	// (start, result, retry or hand back, a job's advance), a job per pair of blocks for
	// fan-outs, and 10 per disruption or extra; endedAt is the event that ended it.
	bound, endedAt int
	finish         *run.Finish
	trace          []string
	tainted        bool
	disrupted      int
}

// worldTemplates is shared by the worlds' interpreters: compiling the same expressions for
// every run would be most of the property test's time.
var worldTemplates = run.NewTemplates(run.EvalLimits{})

func newWorld(c chooser, r *run.Run, cfg worldConfig) *world {
	w := &world{c: c, cfg: cfg, in: run.NewInterpreter(catalog(), worldTemplates, idCounter()), r: r, tr: newTracker(r), now: t0,
		jobs: map[int64]*wjob{}, timer: map[string]time.Time{}}
	w.tr.strictEnds = true
	n := len(r.Def.Blocks)
	w.bound = n*run.MaxAttemptsAnyKind*4 + n*n + 10*(cfg.disruptions+cfg.extras) + 10
	w.addJob(t0) // the dispatch's job
	return w
}

func (w *world) addJob(at time.Time) {
	w.next++
	w.jobs[w.next] = &wjob{id: w.next, try: 1, phase: jobQueued, at: at}
}

func (w *world) jobIDs() []int64 {
	ids := make([]int64, 0, len(w.jobs))
	for id := range w.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// action is one thing the world can do next.
type action struct {
	name string
	due  time.Time
	do   func() error
}

// regular lists what the outcomes asked for and is still pending.
func (w *world) regular() []action {
	var out []action
	for _, id := range w.jobIDs() {
		j := w.jobs[id]
		je := run.JobEvent{Job: j.id, Try: j.try, Stopping: j.stopping}
		switch j.phase {
		case jobQueued:
			out = append(out, action{fmt.Sprintf("job %d advances", id), j.at, func() error {
				return w.jobEvent(j, run.Advance{JobEvent: je, Now: w.now})
			}})
		case jobRunning:
			out = append(out, action{fmt.Sprintf("job %d answers %s", id, j.start.ID), w.now, func() error {
				return w.jobEvent(j, w.answer(j))
			}})
		case jobBackoff:
			if j.stopping {
				out = append(out, action{fmt.Sprintf("job %d hands back %s", id, j.retry.Block), w.now, func() error {
					return w.jobEvent(j, run.HandBack{JobEvent: je, Block: j.retry.Block, At: j.retry.At})
				}})
			} else {
				out = append(out, action{fmt.Sprintf("job %d retries %s", id, j.retry.Block), j.retry.At, func() error {
					return w.jobEvent(j, run.RetryDue{JobEvent: je, Block: j.retry.Block, Now: w.now})
				}})
			}
		}
	}
	blocks := make([]string, 0, len(w.timer))
	for b := range w.timer {
		blocks = append(blocks, b)
	}
	slices.Sort(blocks)
	for _, b := range blocks {
		out = append(out, action{"timer of " + b, w.timer[b], func() error {
			delete(w.timer, b)
			return w.apply(nil, run.TimerFired{Block: b, Now: w.now}, true)
		}})
	}
	if !w.r.Status.Terminal() {
		for _, name := range w.signalWaits() {
			out = append(out, action{"signal " + name, w.now, func() error { return w.signal(name) }})
		}
	}
	return out
}

// signalWaits names the signals the run's signal waits wait for, in definition order.
func (w *world) signalWaits() []string {
	var out []string
	for _, b := range w.r.Def.Blocks {
		if bs, ok := w.r.State.Blocks[b.ID]; ok && bs.Status == run.BlockWaiting && bs.Wait != nil && bs.Wait.Kind == run.WaitSignal {
			out = append(out, bs.Wait.Signal)
		}
	}
	return out
}

// extra lists the disruptions and extras still allowed.
func (w *world) extra() []action {
	var out []action
	ids := w.jobIDs()
	if w.cfg.disruptions > 0 && len(ids) > 0 {
		out = append(out, action{"crash", w.now, func() error {
			w.cfg.disruptions--
			w.disrupted++
			dead := []int64{ids[w.c.intn(len(ids))]}
			if len(ids) > 1 && w.c.intn(3) == 0 {
				if other := ids[w.c.intn(len(ids))]; other != dead[0] {
					dead = append(dead, other)
				}
			}
			// What the sweeper finds: the attempts in flight of the dead jobs, waits aside.
			var lost []run.LostAttempt
			for _, b := range w.r.Def.Blocks {
				if bs, ok := w.r.State.Blocks[b.ID]; ok && bs.Status == run.BlockRunning && bs.InFlight && slices.Contains(dead, bs.Job) {
					lost = append(lost, run.LostAttempt{Block: b.ID, AttemptID: bs.AttemptID, Replica: fmt.Sprintf("replica-of-job-%d", bs.Job)})
				}
			}
			for _, id := range dead {
				delete(w.jobs, id)
			}
			return w.apply(nil, run.AttemptsLost{Attempts: lost, DeadJobs: dead, Now: w.now}, true)
		}})
		out = append(out, action{"a job's try fails", w.now, func() error {
			w.cfg.disruptions--
			w.disrupted++
			j := w.jobs[ids[w.c.intn(len(ids))]]
			w.trace = append(w.trace, fmt.Sprintf("  (job %d try %d failed mid-step)", j.id, j.try))
			j.try++
			j.phase, j.at = jobQueued, w.now.Add(time.Second)
			return nil
		}})
	}
	if w.cfg.disruptions > 0 {
		out = append(out, action{"cancel", w.now, func() error {
			w.cfg.disruptions--
			w.disrupted++
			return w.apply(nil, run.CancelRequested{Now: w.now}, true)
		}})
	}
	if w.cfg.extras > 0 {
		if len(ids) > 0 {
			out = append(out, action{"a replica stops", w.now, func() error {
				w.cfg.extras--
				w.jobs[ids[w.c.intn(len(ids))]].stopping = true
				return nil
			}})
		}
		out = append(out, action{"stray signal", w.now, func() error {
			w.cfg.extras--
			return w.signal([]string{"s1", "s2", "s3"}[w.c.intn(3)])
		}})
		if len(w.replayable) > 0 {
			out = append(out, action{"replay", w.now, func() error {
				w.cfg.extras--
				ev := w.replayable[w.c.intn(len(w.replayable))]
				before, seq, status := snapshot(w.r), w.r.Seq, w.r.Status
				if err := w.apply(nil, ev, false); err != nil {
					return err
				}
				if w.r.Seq != seq || w.r.Status != status || !sameState(before, snapshot(w.r)) {
					return fmt.Errorf("a replayed %s changed the run", describe(ev))
				}
				return nil
			}})
		}
	}
	if w.cfg.arbitrary && w.c.intn(4) == 3 {
		out = append(out, action{"made-up event", w.now, func() error { return w.madeUp() }})
	}
	return out
}

// run drives the run until it has ended and nothing is pending any more.
func (w *world) run() error {
	for w.tr.events < w.cfg.maxEvents {
		regular := w.regular()
		if len(regular) == 0 && !w.r.Status.Terminal() && !w.tainted {
			return w.failf("the run is %s but waits for nothing: no job, no timer, no signal wait", w.r.Status)
		}
		var a action
		if extra := w.extra(); len(extra) > 0 && (len(regular) == 0 || w.c.intn(12) == 11) {
			a = extra[w.c.intn(len(extra))]
		} else if len(regular) > 0 {
			a = regular[w.c.intn(len(regular))]
		} else {
			break
		}
		if a.due.After(w.now) {
			w.now = a.due
		}
		w.now = w.now.Add(time.Duration(w.c.intn(50)) * time.Millisecond)
		w.trace = append(w.trace, "- "+a.name)
		if err := a.do(); err != nil {
			return err
		}
	}
	if w.tainted {
		return nil
	}
	if !w.r.Status.Terminal() {
		return w.failf("not terminal after %d events", w.tr.events)
	}
	if w.endedAt > w.bound {
		return w.failf("the run took %d events to end, more than the bound %d", w.endedAt, w.bound)
	}
	return w.final()
}

// final checks a run that ended, once nothing is pending.
func (w *world) final() error {
	if len(w.jobs) != 0 || len(w.timer) != 0 {
		return w.failf("the world still has %d jobs and %d timers", len(w.jobs), len(w.timer))
	}
	for _, st := range w.begun {
		if _, ok := w.tr.ended[st.ID]; !ok {
			return w.failf("attempt %s of %s never ended", st.ID, st.Block.ID)
		}
	}
	connectors := catalog()
	for _, b := range w.r.Def.Blocks {
		bs, ok := w.r.State.Blocks[b.ID]
		if !ok {
			bs = &run.BlockState{}
		}
		if max(connectors[b.Type].Retry.MaxAttempts, 1) < bs.Attempts-bs.Lost {
			return w.failf("block %s (%s) ran %d attempts, %d lost", b.ID, b.Type, bs.Attempts, bs.Lost)
		}
		if w.r.Status == run.StatusCompleted && bs.Status != run.BlockSucceeded && bs.Status != run.BlockSkipped {
			return w.failf("the run completed with block %s %q", b.ID, bs.Status)
		}
	}
	if w.finish == nil || w.finish.Status != w.r.Status {
		return w.failf("finished %+v, run %s", w.finish, w.r.Status)
	}
	switch w.r.Status {
	case run.StatusCompleted:
		want, err := json.Marshal(w.r.State.Output(w.r.Def))
		if err != nil || string(want) != string(w.finish.Output) {
			return w.failf("output %s, the sinks that ran %s", w.finish.Output, want)
		}
	case run.StatusFailed:
		var e struct {
			BlockID string `json:"block_id"`
		}
		if err := json.Unmarshal(w.finish.Error, &e); err != nil || w.r.State.Blocks[e.BlockID] == nil || w.r.State.Blocks[e.BlockID].Status != run.BlockFailed {
			return w.failf("failed with %s", w.finish.Error)
		}
		// A step fails the run only once it has used up max_attempts (lost ones aside) or the
		// cap of attempts of any kind.
		bs := w.r.State.Blocks[e.BlockID]
		b, _ := w.r.Def.Block(e.BlockID)
		if bs.Attempts-bs.Lost < max(connectors[b.Type].Retry.MaxAttempts, 1) && bs.Attempts < run.MaxAttemptsAnyKind {
			return w.failf("block %s (%s) failed the run after %d attempts, %d of them lost", e.BlockID, b.Type, bs.Attempts, bs.Lost)
		}
	}
	return nil
}

func (w *world) failf(format string, args ...any) error {
	trace := w.trace
	if len(trace) > 120 {
		trace = trace[len(trace)-120:]
	}
	def, _ := json.Marshal(struct {
		Blocks []run.Block
		Edges  []run.Edge
	}{w.r.Def.Blocks, w.r.Def.Edges})
	state, _ := json.Marshal(w.r.State.Blocks)
	return fmt.Errorf("%s\ndefinition: %s\ninput: %v\nstate: %s\nevents (last %d):\n%s", fmt.Sprintf(format, args...), def, w.r.Input, state,
		len(trace), strings.Join(trace, "\n"))
}

// signal stores a signal and delivers it.
func (w *world) signal(name string) error {
	w.sigs = append(w.sigs, &wsignal{sig: run.Signal{ID: fmt.Sprintf("sig_%d", len(w.sigs)+1), Name: name, Payload: json.RawMessage(`{"n":1}`)}})
	return w.apply(nil, run.SignalArrived{Signal: w.sigs[len(w.sigs)-1].sig, Now: w.now}, true)
}

// jobEvent applies an event of job j and moves j on by the outcome.
func (w *world) jobEvent(j *wjob, ev run.Event) error {
	return w.apply(j, ev, true)
}

// apply applies ev (of job j, if any) and carries out the outcome as the engine would.
// faithful says the event is one the engine would send now (its outcome is then checked
// against the world too).
func (w *world) apply(j *wjob, ev run.Event, faithful bool) error {
	wasTerminal := w.r.Status.Terminal()
	o, violations, err := w.tr.apply(w.in, w.r, ev)
	w.trace = append(w.trace, "  "+describe(ev)+" => "+summary(o, err))
	if len(violations) > 0 {
		return w.failf("invariants broken by %s:\n  %s", describe(ev), strings.Join(violations, "\n  "))
	}
	if err != nil {
		var fe *run.FinishedError
		if !errors.As(err, &fe) {
			return w.failf("%s: %v", describe(ev), err)
		}
		return nil
	}
	if !faithful && !reflect.DeepEqual(o, run.Outcome{}) {
		return w.failf("a replayed %s has an outcome: %s", describe(ev), summary(o, nil))
	}
	switch ev.(type) {
	case run.Succeeded, run.Failed, run.Suspended, run.TimerFired:
		if faithful {
			w.replayable = append(w.replayable, ev)
		}
	}
	if j != nil {
		if w.jobs[j.id] != j {
			return w.failf("job %d acts but is gone", j.id)
		}
		switch {
		case o.Start != nil:
			j.phase, j.start = jobRunning, *o.Start
		case o.Retry != nil:
			j.phase, j.retry = jobBackoff, *o.Retry
		default:
			if faithful && !wasTerminal && !o.CompleteJob && !w.tainted {
				return w.failf("job %d's %s was dropped though the run is %s", j.id, describe(ev), w.r.Status)
			}
			delete(w.jobs, j.id)
		}
	}
	w.carryOut(o)
	if !w.tainted && !w.r.Status.Terminal() {
		if id := w.pendingReady(); id != "" && !w.hasQueuedJob() {
			return w.failf("block %s is pending with its upstream done, and no job is coming to take it", id)
		}
	}
	return nil
}

// pendingReady names a pending block every upstream block of which is done (one a job must
// come for: to run it or skip it), or "".
func (w *world) pendingReady() string {
	for _, b := range w.r.Def.Blocks {
		if bs, ok := w.r.State.Blocks[b.ID]; ok && bs.Status != run.BlockPending {
			continue
		}
		done := true
		for _, e := range w.r.Def.Incoming(b.ID) {
			bs, ok := w.r.State.Blocks[e.From]
			done = done && ok && bs.Status.Done()
		}
		if done {
			return b.ID
		}
	}
	return ""
}

func (w *world) hasQueuedJob() bool {
	for _, j := range w.jobs {
		if j.phase == jobQueued {
			return true
		}
	}
	return false
}

// carryOut does what an outcome asks of the world besides the acting job's next step.
func (w *world) carryOut(o run.Outcome) {
	if o.Start != nil {
		w.begun = append(w.begun, *o.Start)
	}
	if o.CancelJobs {
		clear(w.jobs)
	}
	for range o.NewJobs {
		at := w.now
		if o.JobsAt.After(at) {
			at = o.JobsAt
		}
		w.addJob(at)
	}
	if o.ReleaseAll {
		clear(w.timer)
	}
	for _, b := range o.Released {
		delete(w.timer, b)
	}
	for _, a := range o.Armed {
		if !a.Wait.WakeAt.IsZero() {
			w.timer[a.Block] = a.Wait.WakeAt
		}
	}
	if o.Consume != nil {
		for _, s := range w.sigs {
			if s.sig.ID == o.Consume.SignalID {
				s.consumed = true
			}
		}
	}
	if o.Finish != nil {
		w.finish, w.endedAt = o.Finish, w.tr.events
	}
}

// answer is what the connector of job j's attempt reports.
func (w *world) answer(j *wjob) run.Event {
	st := j.start
	je := run.JobEvent{Job: j.id, Try: j.try, Stopping: j.stopping}
	failed := func(msg, code string) run.Event {
		return run.Failed{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Message: msg, Code: code, Now: w.now}
	}
	ok := func(v any) run.Event {
		raw, err := json.Marshal(v)
		if err != nil {
			return failed("the output is not JSON: "+err.Error(), "")
		}
		return run.Succeeded{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Output: raw, Now: w.now}
	}
	if st.ParamErr != nil {
		return failed(st.ParamErr.Error(), "")
	}
	if st.Block.Type != "wait" && w.c.intn(50) == 49 {
		return failed("flaky", []string{"", run.CodeTimeout}[w.c.intn(2)])
	}
	str := func(k string) string { s, _ := st.Params[k].(string); return s }
	switch st.Block.Type {
	case "trigger.manual":
		return ok(w.r.Input)
	case "log":
		return ok(map[string]any{"message": st.Params["message"]})
	case "transform":
		return ok(st.Params["value"])
	case "condition":
		v, err := st.Prepare().Eval(str("expression"), st.Scope)
		if err != nil {
			return failed(err.Error(), "")
		}
		b, isBool := v.(bool)
		if !isBool {
			return failed(fmt.Sprintf("the expression gave %v, not a boolean", v), "")
		}
		return ok(map[string]any{"result": b})
	case "wait":
		ev := run.Suspended{JobEvent: je, Block: st.Block.ID, AttemptID: st.ID, Now: w.now}
		switch {
		case str("duration") != "":
			d, _ := time.ParseDuration(str("duration"))
			ev.Wait = run.WaitRequest{Kind: run.WaitSleep, WakeAt: w.now.Add(d)}
		case str("until") != "":
			until, _ := time.Parse(time.RFC3339, str("until"))
			ev.Wait = run.WaitRequest{Kind: run.WaitSleep, WakeAt: until}
		default:
			timeout, _ := time.ParseDuration(str("timeout"))
			ev.Wait = run.WaitRequest{Kind: run.WaitSignal, Signal: str("signal"), Timeout: timeout}
			for _, s := range w.sigs {
				if !s.consumed && s.sig.Name == ev.Wait.Signal {
					sig := s.sig
					ev.Buffered = &sig
					break
				}
			}
		}
		return ev
	case "fail":
		if num, has := st.Params["fail_attempts"].(json.Number); has {
			if n, err := num.Int64(); err == nil && int64(st.Attempt) > n {
				return ok(map[string]any{"failed_attempts": n})
			}
		}
		return failed(str("message"), "")
	}
	return failed("no executor for "+st.Block.Type, "")
}

// madeUp applies an event made up from the choices alone: any job, try, block or attempt.
func (w *world) madeUp() error {
	c := w.c
	w.bound++ // an event the run's end does not wait for
	w.now = w.now.Add(time.Duration(c.intn(1000)) * time.Millisecond)
	je := run.JobEvent{Job: int64(1 + c.intn(int(w.next)+2)), Try: 1 + c.intn(3), Stopping: c.intn(4) == 0}
	blocks := []string{"nope"}
	for _, b := range w.r.Def.Blocks {
		blocks = append(blocks, b.ID)
	}
	block := blocks[c.intn(len(blocks))]
	attempt := run.StartAttempt{ID: "att_none", Block: run.Block{ID: block}}
	if len(w.begun) > 0 {
		attempt = w.begun[c.intn(len(w.begun))]
		if c.intn(4) == 0 {
			attempt.Block.ID = block
		}
	}
	outputs := []string{`{}`, `{"result":true}`, `{"result":false}`, `null`, `[1,2]`}
	var ev run.Event
	switch c.intn(9) {
	case 0:
		ev = run.Advance{JobEvent: je, Now: w.now}
	case 1:
		ev = run.Succeeded{JobEvent: je, Block: attempt.Block.ID, AttemptID: attempt.ID, Output: json.RawMessage(outputs[c.intn(len(outputs))]), Now: w.now}
	case 2:
		ev = run.Failed{JobEvent: je, Block: attempt.Block.ID, AttemptID: attempt.ID, Message: "made up", Code: []string{"", run.CodeTimeout}[c.intn(2)], Now: w.now}
	case 3:
		wr := []run.WaitRequest{{Kind: run.WaitSleep, WakeAt: w.now.Add(time.Second)}, {Kind: run.WaitSignal, Signal: "s1"},
			{Kind: run.WaitSignal, Signal: "s2", Timeout: time.Minute}, {Kind: "bogus", WakeAt: w.now}}[c.intn(4)]
		var buffered *run.Signal
		if c.intn(3) == 0 {
			buffered = &run.Signal{ID: "sig_made_up", Name: wr.Signal, Payload: json.RawMessage(`1`)}
		}
		ev = run.Suspended{JobEvent: je, Block: attempt.Block.ID, AttemptID: attempt.ID, Wait: wr, Buffered: buffered, Now: w.now}
	case 4:
		ev = run.RetryDue{JobEvent: je, Block: block, Now: w.now}
	case 5:
		ev = run.HandBack{JobEvent: je, Block: block, At: w.now.Add(time.Second)}
	case 6:
		ev = run.TimerFired{Block: block, Now: w.now}
	case 7:
		return w.signal([]string{"s1", "s2"}[c.intn(2)])
	default:
		return w.apply(nil, run.CancelRequested{Now: w.now}, true)
	}
	j := w.jobs[je.Job]
	if j != nil {
		j.try = max(j.try, je.Try)
		j.stopping = j.stopping || je.Stopping
	}
	before := snapshot(w.r)
	status, seq := w.r.Status, w.r.Seq
	o, violations, err := w.tr.apply(w.in, w.r, ev)
	w.trace = append(w.trace, "  made up "+describe(ev)+" => "+summary(o, err))
	if len(violations) > 0 {
		return w.failf("invariants broken by made-up %s:\n  %s", describe(ev), strings.Join(violations, "\n  "))
	}
	if err != nil {
		return nil //nolint:nilerr // a made-up event the interpreter refuses (a signal to a finished run) is simply not part of the story
	}
	// An event that changed nothing and asks for nothing new leaves the world as it was (a
	// made-up event that only completes its job is a phantom: the job it names goes on).
	if w.r.Status == status && w.r.Seq == seq && sameState(before, snapshot(w.r)) && o.Start == nil && o.Retry == nil && o.NewJobs == 0 {
		return nil
	}
	w.tainted = true
	switch {
	case j != nil && o.Start != nil:
		j.phase, j.start = jobRunning, *o.Start
	case j != nil && o.Retry != nil:
		j.phase, j.retry = jobBackoff, *o.Retry
	case o.Start != nil:
		w.jobs[je.Job] = &wjob{id: je.Job, try: je.Try, phase: jobRunning, start: *o.Start, stopping: je.Stopping}
	}
	w.carryOut(o)
	return nil
}

// ---- event descriptions (for failure traces) -------------------------------------------------------

func describe(ev run.Event) string {
	job := func(je run.JobEvent) string {
		s := fmt.Sprintf("job %d", je.Job)
		if je.Try > 1 {
			s += fmt.Sprintf(" try %d", je.Try)
		}
		if je.Stopping {
			s += " stopping"
		}
		return s
	}
	ms := func(t time.Time) int64 { return t.Sub(t0).Milliseconds() }
	switch e := ev.(type) {
	case run.Advance:
		return fmt.Sprintf("Advance(%s)@%d", job(e.JobEvent), ms(e.Now))
	case run.Succeeded:
		return fmt.Sprintf("Succeeded(%s, %s %s, %s)@%d", job(e.JobEvent), e.Block, e.AttemptID, e.Output, ms(e.Now))
	case run.Failed:
		return fmt.Sprintf("Failed(%s, %s %s, %q %s)@%d", job(e.JobEvent), e.Block, e.AttemptID, e.Message, e.Code, ms(e.Now))
	case run.Suspended:
		s := fmt.Sprintf("Suspended(%s, %s %s, %s %s wake@%d timeout %s", job(e.JobEvent), e.Block, e.AttemptID, e.Wait.Kind, e.Wait.Signal,
			ms(e.Wait.WakeAt), e.Wait.Timeout)
		if e.Buffered != nil {
			s += ", buffered " + e.Buffered.ID
		}
		return s + fmt.Sprintf(")@%d", ms(e.Now))
	case run.RetryDue:
		return fmt.Sprintf("RetryDue(%s, %s)@%d", job(e.JobEvent), e.Block, ms(e.Now))
	case run.HandBack:
		return fmt.Sprintf("HandBack(%s, %s, at %d)", job(e.JobEvent), e.Block, ms(e.At))
	case run.AttemptsLost:
		return fmt.Sprintf("AttemptsLost(%+v, dead jobs %v)@%d", e.Attempts, e.DeadJobs, ms(e.Now))
	case run.TimerFired:
		return fmt.Sprintf("TimerFired(%s)@%d", e.Block, ms(e.Now))
	case run.SignalArrived:
		return fmt.Sprintf("SignalArrived(%s %s)@%d", e.Signal.ID, e.Signal.Name, ms(e.Now))
	case run.CancelRequested:
		return fmt.Sprintf("CancelRequested@%d", ms(e.Now))
	}
	return fmt.Sprintf("%T", ev)
}

func summary(o run.Outcome, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	if o.Start != nil {
		parts = append(parts, fmt.Sprintf("start %s#%d %s", o.Start.Block.ID, o.Start.Attempt, o.Start.ID))
	}
	for _, e := range o.Ended {
		parts = append(parts, fmt.Sprintf("ended %s %s %s", e.Block, e.ID, e.Status))
	}
	if o.Retry != nil {
		parts = append(parts, fmt.Sprintf("retry %s#%d", o.Retry.Block, o.Retry.Attempt))
	}
	for _, a := range o.Armed {
		parts = append(parts, "armed "+a.Block)
	}
	if len(o.Released) > 0 {
		parts = append(parts, fmt.Sprintf("released %v", o.Released))
	}
	if o.NewJobs > 0 {
		parts = append(parts, fmt.Sprintf("new jobs %d", o.NewJobs))
	}
	if o.CompleteJob {
		parts = append(parts, "complete job")
	}
	if o.CancelJobs {
		parts = append(parts, "cancel jobs")
	}
	if o.Finish != nil {
		parts = append(parts, "finish "+string(o.Finish.Status))
	}
	if len(o.Changed) > 0 {
		parts = append(parts, fmt.Sprintf("changed %v", o.Changed))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}
