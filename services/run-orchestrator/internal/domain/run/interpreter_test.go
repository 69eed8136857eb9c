package run_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Tests of the pure interpreter (contract §3, and §2 on connectors and templates). Every
// event of every test goes through tracker.apply, which checks the invariants that hold after
// any Apply (the fuzz target and the property test use the same checker).

// ---- fixtures ------------------------------------------------------------------------------

// t0 is the fixed time the tests' events happen at (no clock is read anywhere).
var t0 = time.Date(2026, time.November, 22, 2, 6, 44, 537_000_000, time.UTC)

// at is t0 plus n milliseconds.
func at(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// The retry policies of proto/connectors/catalog (TestCatalogMirror holds them to it).
var (
	policyOne  = run.RetryPolicy{MaxAttempts: 1, InitialIntervalMS: 100, BackoffCoefficient: 2, MaxIntervalMS: 1000}
	policyFail = run.RetryPolicy{MaxAttempts: 3, InitialIntervalMS: 100, BackoffCoefficient: 2, MaxIntervalMS: 1000}
	policyHTTP = run.RetryPolicy{MaxAttempts: 3, InitialIntervalMS: 500, BackoffCoefficient: 2, MaxIntervalMS: 10000}
)

// catalog is the interpreter's view of the built-in connectors, as the engine builds it from
// the catalog: the retry policy, the x-expression params kept raw, and the hidden params the
// server sets.
func catalog() map[string]run.Connector {
	return map[string]run.Connector{
		"trigger.manual":   {Retry: policyOne},
		"trigger.webhook":  {Retry: policyOne},
		"trigger.schedule": {Retry: policyOne},
		"transform":        {Retry: policyOne},
		"condition":        {Retry: policyOne, Raw: map[string]bool{"expression": true}},
		"wait":             {Retry: policyOne},
		"log":              {Retry: policyOne},
		"fail":             {Retry: policyFail},
		"http.request":     {Retry: policyHTTP, Extra: map[string]any{"allow_private_network": false}},
	}
}

// idCounter names attempts att_1, att_2, ...
func idCounter() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("att_%d", n)
	}
}

func newInterpreter() *run.Interpreter {
	return run.NewInterpreter(catalog(), run.NewTemplates(), idCounter())
}

func parseDef(tb testing.TB, raw string) run.Definition {
	tb.Helper()
	d, err := run.ParseDefinition([]byte(raw))
	require.NoError(tb, err)
	return d
}

func newRun(def run.Definition, input any) *run.Run {
	return &run.Run{ID: "run_1", OrganizationID: "org_1", WorkflowID: "wf_1", Status: run.StatusQueued,
		Def: def, Input: input, State: run.NewState()}
}

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

// ---- a harness for one run ------------------------------------------------------------------

type harness struct {
	t  *testing.T
	in *run.Interpreter
	r  *run.Run
	tr *tracker
}

func newHarness(t *testing.T, def string, input any) *harness {
	t.Helper()
	r := newRun(parseDef(t, def), input)
	tr := newTracker(r)
	tr.strictEnds = true
	return &harness{t: t, in: newInterpreter(), r: r, tr: tr}
}

// apply applies ev, which must be accepted, and checks the invariants.
func (h *harness) apply(ev run.Event) run.Outcome {
	h.t.Helper()
	o, err := h.applyErr(ev)
	require.NoError(h.t, err)
	return o
}

// applyErr applies ev, checks the invariants and returns Apply's error.
func (h *harness) applyErr(ev run.Event) (run.Outcome, error) {
	h.t.Helper()
	o, violations, err := h.tr.apply(h.in, h.r, ev)
	require.Empty(h.t, violations, "after %T %+v", ev, ev)
	return o, err
}

func (h *harness) block(id string) run.BlockState {
	h.t.Helper()
	b, ok := h.r.State.Blocks[id]
	require.True(h.t, ok, "block %s has no state", id)
	return *b
}

// job is a JobEvent of job n's first try.
func job(n int64) run.JobEvent { return run.JobEvent{Job: n, Try: 1} }

// start is the first event of a run: job 1 takes it, and the trigger's attempt begins.
func (h *harness) start() run.StartAttempt {
	h.t.Helper()
	o := h.apply(run.Advance{JobEvent: job(1), Now: t0})
	require.NotNil(h.t, o.Start)
	return *o.Start
}

// succeed reports st succeeded for job n.
func (h *harness) succeed(n int64, st run.StartAttempt, output string, now time.Time) run.Outcome {
	h.t.Helper()
	return h.apply(run.Succeeded{JobEvent: job(n), Block: st.Block.ID, AttemptID: st.ID, Output: json.RawMessage(output), Now: now})
}

// fail reports st failed for job n.
func (h *harness) fail(n int64, st run.StartAttempt, msg string, now time.Time) run.Outcome {
	h.t.Helper()
	return h.apply(run.Failed{JobEvent: job(n), Block: st.Block.ID, AttemptID: st.ID, Message: msg, Now: now})
}

func kinds(cs []run.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Kind
		if c.Kind == run.ChangeStatus {
			out[i] += ":" + string(c.Status)
		} else {
			out[i] += ":" + c.BlockID
		}
		if c.AttemptStatus != "" {
			out[i] += ":" + c.AttemptStatus
		}
	}
	return out
}

func seqs(cs []run.Change) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

func errorOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// ---- definitions used by several tests -------------------------------------------------------

const linearDef = `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"a","type":"log","params":{"message":"hello {{ input.name }}"}}
],"edges":[{"block_id":"t","target_block_id":"a"}]}`

// branchDef: t -> c; c -true-> yes; c -false-> no -> after_no; yes -> join; after_no -> join.
const branchDef = `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"c","type":"condition","params":{"expression":"input.n > 5"}},
	{"block_id":"yes","type":"log","params":{"message":"big"}},
	{"block_id":"no","type":"log","params":{"message":"small"}},
	{"block_id":"after_no","type":"log","params":{"message":"after small"}},
	{"block_id":"join","type":"transform","params":{"value":"{{ input.n }}"}}
],"edges":[
	{"block_id":"t","target_block_id":"c"},
	{"block_id":"c","target_block_id":"yes","branch":"true"},
	{"block_id":"c","target_block_id":"no","branch":"false"},
	{"block_id":"no","target_block_id":"after_no"},
	{"block_id":"yes","target_block_id":"join"},
	{"block_id":"after_no","target_block_id":"join"}
]}`

// failDef: t -> f (fail, 3 attempts by policy) -> after.
const failDef = `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"f","type":"fail","params":{"message":"boom"}},
	{"block_id":"after","type":"log","params":{"message":"after"}}
],"edges":[{"block_id":"t","target_block_id":"f"},{"block_id":"f","target_block_id":"after"}]}`

// waitDef: t -> w (wait with the given params) -> after.
func waitDef(params string) string {
	return `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"w","type":"wait","params":` + params + `},
	{"block_id":"after","type":"transform","params":{"value":"{{ steps.w.output }}"}}
],"edges":[{"block_id":"t","target_block_id":"w"},{"block_id":"w","target_block_id":"after"}]}`
}

// fanDef: t -> a, b, c -> j.
const fanDef = `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"a","type":"transform","params":{"value":"A"}},
	{"block_id":"b","type":"transform","params":{"value":"B"}},
	{"block_id":"c","type":"transform","params":{"value":"C"}},
	{"block_id":"j","type":"transform","params":{"value":["{{ steps.a.output }}","{{ steps.b.output }}","{{ steps.c.output }}"]}}
],"edges":[
	{"block_id":"t","target_block_id":"a"},{"block_id":"t","target_block_id":"b"},{"block_id":"t","target_block_id":"c"},
	{"block_id":"a","target_block_id":"j"},{"block_id":"b","target_block_id":"j"},{"block_id":"c","target_block_id":"j"}
]}`

// ---- the catalog ------------------------------------------------------------------------------

// TestCatalogMirror holds the tests' connectors to proto/connectors/catalog: the same retry
// policies, and the x-expression params kept raw.
func TestCatalogMirror(t *testing.T) {
	t.Parallel()
	mine := catalog()
	entries := connectors.MustLoad()
	require.Len(t, mine, len(entries))
	for _, e := range entries {
		c, ok := mine[e.Type]
		require.True(t, ok, "type %s", e.Type)
		require.Equal(t, run.RetryPolicy(e.RetryPolicy), c.Retry, "retry policy of %s", e.Type)
		var schema struct {
			Properties map[string]struct {
				Expr bool `json:"x-expression"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(e.Params, &schema))
		for name, p := range schema.Properties {
			require.Equal(t, p.Expr, c.Raw[name], "%s.%s raw", e.Type, name)
		}
		require.ElementsMatch(t, e.HiddenParams(), slices.Collect(maps.Keys(c.Extra)), "hidden params of %s", e.Type)
	}
}

func TestRetryPolicyBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy run.RetryPolicy
		want   []time.Duration // Backoff(1), Backoff(2), ...
	}{
		{"fail: 100ms x2, 1s max", policyFail, []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}},
		{"http.request: 500ms x2, 10s max", policyHTTP, []time.Duration{500, 1000, 2000, 4000, 8000, 10000, 10000}},
		{"coefficient 1", run.RetryPolicy{MaxAttempts: 5, InitialIntervalMS: 250, BackoffCoefficient: 1, MaxIntervalMS: 1000}, []time.Duration{250, 250, 250}},
		{"no max", run.RetryPolicy{MaxAttempts: 5, InitialIntervalMS: 10, BackoffCoefficient: 3}, []time.Duration{10, 30, 90, 270}},
		{"a zero policy waits 1ms", run.RetryPolicy{}, []time.Duration{1, 1, 1}},
		{"under 1ms is 1ms", run.RetryPolicy{InitialIntervalMS: 0, BackoffCoefficient: 2, MaxIntervalMS: 5}, []time.Duration{1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i, w := range tc.want {
				require.Equal(t, w*time.Millisecond, tc.policy.Backoff(i+1), "Backoff(%d)", i+1)
			}
		})
	}
}

// ---- start of a run --------------------------------------------------------------------------

func TestStartOfRun(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{"input_schema":{"type":"object","description":"{{ not a template }}"}}},
		{"block_id":"a","type":"log","params":{"message":"hello {{ input.name }}"}}
	],"edges":[{"block_id":"t","target_block_id":"a"}]}`
	h := newHarness(t, def, map[string]any{"name": "ada"})

	o := h.apply(run.Advance{JobEvent: job(1), Now: t0})
	require.NotNil(t, o.Start, "the trigger is ready at once")
	require.Equal(t, "att_1", o.Start.ID)
	require.Equal(t, "t", o.Start.Block.ID)
	require.Equal(t, 1, o.Start.Attempt)
	require.Equal(t, int64(1), o.Start.Seq)
	require.NoError(t, o.Start.ParamErr)
	require.Equal(t, map[string]any{"input_schema": map[string]any{"type": "object", "description": "{{ not a template }}"}},
		o.Start.Params, "trigger.manual's input_schema is kept as it is")
	require.Equal(t, []run.StartAttempt{*o.Start}, o.Begun)
	require.Equal(t, []string{"t"}, o.Changed)
	require.Equal(t, []string{"attempt.started:t:running", "run.status:running"}, kinds(o.Changes))
	require.Equal(t, []int64{1, 2}, seqs(o.Changes))
	require.Equal(t, t0, o.Changes[0].At)
	require.Zero(t, o.NewJobs)
	require.False(t, o.CompleteJob)
	require.Nil(t, o.Finish)
	require.Equal(t, run.StatusRunning, h.r.Status)
	require.Equal(t, run.BlockState{Status: run.BlockRunning, Attempts: 1, Job: 1, AttemptID: "att_1", InFlight: true}, h.block("t"))

	// The trigger's output is the run input; the same job goes straight on to the next block.
	o = h.succeed(1, *o.Start, `{"name":"ada"}`, at(5))
	require.NotNil(t, o.Start)
	require.Equal(t, "a", o.Start.Block.ID)
	require.Equal(t, int64(4), o.Start.Seq)
	require.Equal(t, map[string]any{"message": "hello ada"}, o.Start.Params)
	require.Equal(t, []string{"t", "a"}, o.Changed)
	require.Equal(t, []string{"attempt.finished:t:succeeded", "attempt.started:a:running"}, kinds(o.Changes))
	require.Equal(t, []int64{3, 4}, seqs(o.Changes))
	require.Equal(t, []run.EndedAttempt{{ID: "att_1", Block: "t", Status: "succeeded", Output: json.RawMessage(`{"name":"ada"}`), Seq: 3}}, o.Ended)

	o = h.succeed(1, *o.Start, `{"message":"hello ada"}`, at(9))
	require.Nil(t, o.Start)
	require.True(t, o.CompleteJob)
	require.Equal(t, &run.Finish{Status: run.StatusCompleted, Output: json.RawMessage(`{"a":{"message":"hello ada"}}`)}, o.Finish)
	require.True(t, o.ReleaseAll)
	require.Equal(t, []string{"attempt.finished:a:succeeded", "run.status:completed"}, kinds(o.Changes))
	require.Equal(t, []int64{5, 6}, seqs(o.Changes))
	require.Equal(t, run.StatusCompleted, h.r.Status)

	// A job of a finished run completes and does nothing else.
	o = h.apply(run.Advance{JobEvent: job(7), Now: at(10)})
	require.Equal(t, run.Outcome{CompleteJob: true}, o)
}

func TestAdvanceOfAStoppingReplicaHandsTheRunOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, linearDef, map[string]any{"name": "x"})
	o := h.apply(run.Advance{JobEvent: run.JobEvent{Job: 1, Try: 1, Stopping: true}, Now: t0})
	require.Nil(t, o.Start)
	require.Equal(t, 1, o.NewJobs)
	require.True(t, o.CompleteJob)
	require.Empty(t, o.Changed)
	require.Equal(t, run.StatusQueued, h.r.Status)

	st := h.start()
	o = h.apply(run.Succeeded{JobEvent: run.JobEvent{Job: 1, Try: 1, Stopping: true}, Block: "t", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(1)})
	require.Nil(t, o.Start, "a stopping replica starts no next block")
	require.Equal(t, 1, o.NewJobs)
	require.True(t, o.CompleteJob)
	require.Equal(t, []string{"t"}, o.Changed)
	require.Equal(t, run.BlockPending, h.r.State.Block("a").Status)
}

func TestUnknownEvent(t *testing.T) {
	t.Parallel()
	type other struct{ run.Advance }
	h := newHarness(t, linearDef, nil)
	_, err := h.in.Apply(h.r, other{})
	require.ErrorContains(t, err, "unknown event")
	require.Equal(t, run.StatusQueued, h.r.Status)
}

// ---- templates -----------------------------------------------------------------------------

func TestTemplates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value any // the transform's value param
		want  any
		err   string // ParamErr contains
	}{
		{name: "input keeps its JSON type", value: "{{ input.n }}", want: 7},
		{name: "whole-string template with spaces around", value: "  {{ input.n * 2 }} ", want: 14},
		{name: "a boolean", value: "{{ input.n > 5 }}", want: true},
		{name: "an object", value: "{{ input.tags }}", want: []any{"x", "y"}},
		{name: "step output", value: "{{ steps.t.output.n }}", want: float64(7)},
		{name: "whole step output", value: "{{ steps.t.output }}", want: map[string]any{"n": float64(7), "name": "ada", "tags": []any{"x", "y"}}},
		{name: "run.id", value: "{{ run.id }}", want: "run_1"},
		{name: "workflow.id", value: "{{ workflow.id }}", want: "wf_1"},
		{name: "interpolation makes a string", value: "n={{ input.n }} tags={{ input.tags }} who={{ input.name }}", want: `n=7 tags=["x","y"] who=ada`},
		{name: "two templates make a string", value: "{{ input.n }}{{ input.n }}", want: "77"},
		{name: "no template", value: "plain {text}", want: "plain {text}"},
		{name: "nested object and array", value: map[string]any{"a": []any{"{{ run.id }}", "lit", json.Number("3")}, "b": "{{ input.name }}"},
			want: map[string]any{"a": []any{"run_1", "lit", json.Number("3")}, "b": "ada"}},
		{name: "number param unchanged", value: json.Number("12.5"), want: json.Number("12.5")},
		{name: "undefined name is nil", value: "{{ nothing }}", want: nil},
		{name: "syntax error", value: "{{ input.n + }}", err: "param value"},
		{name: "fetch from a number", value: "{{ input.n.x }}", err: "cannot fetch x"},
		{name: "unterminated template", value: "a {{ input.n", err: "param value"},
		{name: "error inside an object", value: map[string]any{"k": "{{ ) }}"}, err: "param value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			value, err := json.Marshal(tc.value)
			require.NoError(t, err)
			def := `{"blocks":[
				{"block_id":"t","type":"trigger.manual","params":{}},
				{"block_id":"x","type":"transform","params":{"value":` + string(value) + `}}
			],"edges":[{"block_id":"t","target_block_id":"x"}]}`
			h := newHarness(t, def, map[string]any{"n": 7, "name": "ada", "tags": []any{"x", "y"}})
			st := h.start()
			o := h.succeed(1, st, `{"n":7,"name":"ada","tags":["x","y"]}`, at(1))
			require.NotNil(t, o.Start)
			scope := o.Start.Scope
			require.Equal(t, map[string]any{"id": "run_1"}, scope["run"])
			require.Equal(t, map[string]any{"id": "wf_1"}, scope["workflow"])
			require.Equal(t, h.r.Input, scope["input"])
			require.Contains(t, scope["steps"], "t")
			if tc.err != "" {
				require.Error(t, o.Start.ParamErr)
				require.ErrorContains(t, o.Start.ParamErr, tc.err)
				// The attempt fails with why, by the connector's policy (transform: 1 attempt).
				o = h.fail(1, *o.Start, o.Start.ParamErr.Error(), at(2))
				require.Equal(t, run.StatusFailed, h.r.Status)
				require.Equal(t, "x", errorOf(t, o.Finish.Error)["block_id"])
				return
			}
			require.NoError(t, o.Start.ParamErr)
			require.Equal(t, tc.want, o.Start.Params["value"])
		})
	}
}

func TestTemplatesRawAndExtraParams(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"c","type":"condition","params":{"expression":"{{ input.n }} > 5"}},
		{"block_id":"h","type":"http.request","params":{"method":"GET","url":"https://example.com/{{ input.n }}"}}
	],"edges":[{"block_id":"t","target_block_id":"c"},{"block_id":"c","target_block_id":"h","branch":"true"}]}`
	h := newHarness(t, def, map[string]any{"n": 9})
	o := h.succeed(1, h.start(), `{"n":9}`, at(1))
	require.Equal(t, map[string]any{"expression": "{{ input.n }} > 5"}, o.Start.Params, "an x-expression param is kept raw")
	require.NoError(t, o.Start.ParamErr)
	o = h.succeed(1, *o.Start, `{"result":true}`, at(2))
	require.Equal(t, map[string]any{"method": "GET", "url": "https://example.com/9", "allow_private_network": false}, o.Start.Params,
		"the server's hidden params are added")
}

// A step whose params fail to resolve retries by its connector's policy, each attempt failing
// the same way, and the run fails with the template error.
func TestTemplateErrorRetriesByPolicy(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"f","type":"fail","params":{"message":"{{ input. }}"}}
	],"edges":[{"block_id":"t","target_block_id":"f"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	for i := 1; i <= 3; i++ {
		require.NotNil(t, o.Start)
		require.Equal(t, i, o.Start.Attempt)
		require.Error(t, o.Start.ParamErr)
		o = h.fail(1, *o.Start, o.Start.ParamErr.Error(), at(int64(1000*i)))
		if i < 3 {
			require.NotNil(t, o.Retry)
			o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})
		}
	}
	require.Equal(t, run.StatusFailed, h.r.Status)
	require.Contains(t, errorOf(t, o.Finish.Error)["message"], "param message")
}

// ---- branches and skips ----------------------------------------------------------------------

func TestBranches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		condOut     string
		taken       []string // blocks run after c, in order
		skipped     []string
		firstChange []string // Changed of c's success
		output      string
	}{
		{name: "true", condOut: `{"result":true}`, taken: []string{"yes", "join"}, skipped: []string{"no", "after_no"},
			firstChange: []string{"c", "no", "after_no", "yes"}, output: `{"join":9}`},
		{name: "false", condOut: `{"result":false}`, taken: []string{"no", "after_no", "join"}, skipped: []string{"yes"},
			firstChange: []string{"c", "yes", "no"}, output: `{"join":9}`},
		{name: "not a boolean is false", condOut: `{"result":"true"}`, taken: []string{"no", "after_no", "join"}, skipped: []string{"yes"},
			firstChange: []string{"c", "yes", "no"}, output: `{"join":9}`},
		{name: "no result is false", condOut: `{}`, taken: []string{"no", "after_no", "join"}, skipped: []string{"yes"},
			firstChange: []string{"c", "yes", "no"}, output: `{"join":9}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, branchDef, map[string]any{"n": 9})
			o := h.succeed(1, h.start(), `{"n":9}`, at(1))
			require.Equal(t, "c", o.Start.Block.ID)
			require.Equal(t, map[string]any{"expression": "input.n > 5"}, o.Start.Params)
			o = h.succeed(1, *o.Start, tc.condOut, at(2))
			require.Equal(t, tc.firstChange, o.Changed, "c, then the skipped blocks, then the one started")
			require.Zero(t, o.NewJobs)
			for _, id := range tc.skipped {
				require.Equal(t, run.BlockSkipped, h.block(id).Status, id)
			}
			for i, id := range tc.taken {
				require.NotNil(t, o.Start, "%s should start", id)
				require.Equal(t, id, o.Start.Block.ID)
				out := `{"logged":true}`
				if id == "join" {
					require.Equal(t, 9, o.Start.Params["value"])
					out = `9`
				}
				o = h.succeed(1, *o.Start, out, at(int64(3+i)))
			}
			require.Nil(t, o.Start)
			require.Equal(t, run.StatusCompleted, h.r.Status)
			require.JSONEq(t, tc.output, string(o.Finish.Output), "output: the sinks that ran")
		})
	}
}

// A sink on the branch not taken is skipped and is not in the output; skips cascade through
// several levels and past a join none of whose edges is taken.
func TestSkipsCascadeAndOutputIsTheSinksThatRan(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"c","type":"condition","params":{"expression":"false"}},
		{"block_id":"x1","type":"log","params":{"message":"1"}},
		{"block_id":"x2","type":"log","params":{"message":"2"}},
		{"block_id":"x3","type":"log","params":{"message":"3"}},
		{"block_id":"xj","type":"log","params":{"message":"join of x2, x3"}},
		{"block_id":"other","type":"transform","params":{"value":{"ok":true}}}
	],"edges":[
		{"block_id":"t","target_block_id":"c"},
		{"block_id":"c","target_block_id":"x1","branch":"true"},
		{"block_id":"x1","target_block_id":"x2"},{"block_id":"x1","target_block_id":"x3"},
		{"block_id":"x2","target_block_id":"xj"},{"block_id":"x3","target_block_id":"xj"},
		{"block_id":"c","target_block_id":"other","branch":"false"}
	]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(1))
	o = h.succeed(1, *o.Start, `{"result":false}`, at(2))
	require.Equal(t, []string{"c", "x1", "x2", "x3", "xj", "other"}, o.Changed)
	for _, id := range []string{"x1", "x2", "x3", "xj"} {
		require.Equal(t, run.BlockSkipped, h.block(id).Status, id)
	}
	require.Equal(t, "other", o.Start.Block.ID)
	o = h.succeed(1, *o.Start, `{"ok":true}`, at(3))
	require.Equal(t, run.StatusCompleted, h.r.Status)
	require.JSONEq(t, `{"other":{"ok":true}}`, string(o.Finish.Output))
}

// A run whose every sink was skipped completes with an empty output.
func TestRunOutputWithoutSinksThatRan(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"c","type":"condition","params":{"expression":"true"}},
		{"block_id":"x","type":"log","params":{"message":"1"}}
	],"edges":[{"block_id":"t","target_block_id":"c"},{"block_id":"c","target_block_id":"x","branch":"false"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(1))
	o = h.succeed(1, *o.Start, `{"result":true}`, at(2))
	require.Equal(t, []string{"c", "x"}, o.Changed)
	require.True(t, o.CompleteJob)
	require.JSONEq(t, `{}`, string(o.Finish.Output))
}

// ---- retries by connector policy ---------------------------------------------------------------

func TestRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, failDef, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	st := *o.Start
	require.Equal(t, "f", st.Block.ID)
	require.Equal(t, map[string]any{"message": "boom"}, st.Params)

	// Attempt 1 fails: attempt 2 is due 100 ms later, the job keeps the run.
	now := at(1000)
	o = h.fail(1, st, "boom", now)
	require.Equal(t, &run.Retry{Block: "f", Attempt: 2, At: now.Add(100 * time.Millisecond)}, o.Retry)
	require.False(t, o.CompleteJob)
	require.Nil(t, o.Start)
	require.Nil(t, o.Finish)
	require.Equal(t, []string{"f"}, o.Changed)
	require.Equal(t, []string{"attempt.finished:f:failed", "retry.scheduled:f"}, kinds(o.Changes))
	require.Equal(t, []int64{5, 5}, seqs(o.Changes))
	require.Equal(t, 2, o.Changes[1].Attempt)
	require.Equal(t, now.Add(100*time.Millisecond), o.Changes[1].RetryAt)
	require.JSONEq(t, `{"message":"boom"}`, string(o.Ended[0].Error))
	require.Equal(t, now.Add(100*time.Millisecond), h.block("f").RetryAt)
	require.Equal(t, run.BlockRunning, h.block("f").Status)
	require.False(t, h.block("f").InFlight)
	require.Equal(t, run.StatusRunning, h.r.Status)

	// RetryDue starts attempt 2.
	o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})
	require.NotNil(t, o.Start)
	require.Equal(t, 2, o.Start.Attempt)
	require.Equal(t, "att_3", o.Start.ID)
	require.Equal(t, int64(6), o.Start.Seq)
	require.True(t, h.block("f").RetryAt.IsZero())

	// Attempt 2 fails (a timeout): 200 ms.
	now = at(2000)
	o = h.apply(run.Failed{JobEvent: job(1), Block: "f", AttemptID: o.Start.ID, Message: "deadline", Code: run.CodeTimeout, Now: now})
	require.Equal(t, &run.Retry{Block: "f", Attempt: 3, At: now.Add(200 * time.Millisecond)}, o.Retry)
	require.JSONEq(t, `{"message":"deadline","code":"timeout"}`, string(o.Ended[0].Error))
	o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})

	// Attempt 3 is the last of max_attempts 3: the run fails, no new step starts.
	o = h.fail(1, *o.Start, "boom 3", at(3000))
	require.Nil(t, o.Retry)
	require.True(t, o.CompleteJob)
	require.Equal(t, run.StatusFailed, h.r.Status)
	require.Equal(t, run.StatusFailed, o.Finish.Status)
	require.JSONEq(t, `{"block_id":"f","message":"boom 3"}`, string(o.Finish.Error))
	require.Equal(t, []string{"attempt.finished:f:failed", "run.status:failed"}, kinds(o.Changes))
	require.Equal(t, run.BlockFailed, h.block("f").Status)
	require.Equal(t, run.BlockPending, h.r.State.Block("after").Status)
}

// Retries follow the policy of the block's connector: the delay grows by the coefficient up to
// the max, and max_attempts bounds them.
func TestRetryDelaysByConnector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ    string
		params string
		delays []time.Duration // between attempt n's failure and attempt n+1
	}{
		{"fail", `{"message":"x"}`, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"http.request", `{"method":"GET","url":"https://example.com"}`, []time.Duration{500 * time.Millisecond, time.Second}},
		{"log", `{"message":"x"}`, nil},
		{"transform", `{"value":1}`, nil},
		{"wait", `{"duration":"1s"}`, nil},
		{"condition", `{"expression":"true"}`, nil},
		{"no.such.type", `{}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			def := `{"blocks":[{"block_id":"t","type":"trigger.manual","params":{}},{"block_id":"b","type":"` + tc.typ + `","params":` + tc.params + `}],
				"edges":[{"block_id":"t","target_block_id":"b"}]}`
			h := newHarness(t, def, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			now := at(10_000)
			for i, d := range tc.delays {
				o = h.fail(1, *o.Start, "no", now)
				require.NotNil(t, o.Retry, "attempt %d", i+1)
				require.Equal(t, now.Add(d), o.Retry.At)
				require.Equal(t, i+2, o.Retry.Attempt)
				now = now.Add(time.Minute)
				o = h.apply(run.RetryDue{JobEvent: job(1), Block: "b", Now: now})
			}
			o = h.fail(1, *o.Start, "no", now)
			require.Nil(t, o.Retry)
			require.Equal(t, run.StatusFailed, h.r.Status)
			require.Equal(t, len(tc.delays)+1, h.block("b").Attempts)
		})
	}
}

// RetryDue applies only to the job holding the block between retries.
func TestRetryDueThatNoLongerApplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(h *harness, st run.StartAttempt) run.RetryDue
	}{
		{"another job", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			return run.RetryDue{JobEvent: job(2), Block: "f", Now: at(200)}
		}},
		{"not between retries", func(_ *harness, _ run.StartAttempt) run.RetryDue {
			return run.RetryDue{JobEvent: job(1), Block: "f", Now: at(200)}
		}},
		{"unknown block", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			return run.RetryDue{JobEvent: job(1), Block: "nope", Now: at(200)}
		}},
		{"cancelled meanwhile", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			h.apply(run.CancelRequested{Now: at(50)})
			return run.RetryDue{JobEvent: job(1), Block: "f", Now: at(200)}
		}},
		{"twice", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: at(101)})
			return run.RetryDue{JobEvent: job(1), Block: "f", Now: at(102)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, failDef, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			ev := tc.setup(h, *o.Start)
			before := snapshot(h.r)
			o = h.apply(ev)
			require.Equal(t, run.Outcome{}, o)
			require.Equal(t, before, snapshot(h.r))
		})
	}
}

// Lost attempts do not count against max_attempts; 10 attempts of any kind stop the step.
func TestRetriesWithLostAttempts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string // per attempt: L lost (sweeper), R lost (job's try failed), F failed
		// want: after the script, "retry" (a retry is scheduled), "running" (the block runs
		// again), or "failed" with the message.
		want    string
		message string
	}{
		{name: "one lost, three failures", script: "LFFF", want: "failed", message: "boom"},
		{name: "one lost, two failures retry", script: "LFF", want: "retry"},
		{name: "lost by a failed try", script: "RFF", want: "retry"},
		{name: "seven lost, two failures: a tenth attempt", script: "LLLRLLLFF", want: "retry"},
		{name: "nine lost, the tenth attempt fails: the cap", script: "LLLLLLLLLF", want: "failed", message: "boom"},
		{name: "the tenth attempt lost", script: "LLLLLLLLLL", want: "failed", message: "step stopped after 10 attempts (the last was lost: its replica stopped heartbeating)"},
		{name: "the tenth attempt lost by a failed try", script: "FFLLLLLLLR", want: "failed", message: "step stopped after 10 attempts (the last was lost: its job's try failed mid-step)"},
		{name: "nine attempts of any kind", script: "LLLLLLLFF", want: "retry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, failDef, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			jobID, try := int64(1), 1
			now := at(100)
			for i, step := range tc.script {
				now = now.Add(time.Second)
				require.NotNil(t, o.Start, "attempt %d", i+1)
				require.Equal(t, i+1, o.Start.Attempt)
				st := *o.Start
				switch step {
				case 'F':
					o = h.apply(run.Failed{JobEvent: run.JobEvent{Job: jobID, Try: try}, Block: "f", AttemptID: st.ID, Message: "boom", Now: now})
					if o.Retry != nil {
						o = h.apply(run.RetryDue{JobEvent: run.JobEvent{Job: jobID, Try: try}, Block: "f", Now: o.Retry.At})
					}
				case 'L':
					o = h.apply(run.AttemptsLost{Attempts: []run.LostAttempt{{Block: "f", AttemptID: st.ID, Replica: "r1"}}, DeadJobs: []int64{jobID}, Now: now})
					require.Len(t, o.Ended, 1)
					require.Equal(t, "lost", o.Ended[0].Status)
					if o.Finish == nil {
						require.Equal(t, 1, o.NewJobs)
						jobID, try = jobID+1, 1
						o = h.apply(run.Advance{JobEvent: run.JobEvent{Job: jobID, Try: try}, Now: now})
					}
				case 'R':
					try++
					o = h.apply(run.Advance{JobEvent: run.JobEvent{Job: jobID, Try: try}, Now: now})
					require.Equal(t, "lost", o.Ended[0].Status)
				}
			}
			b := h.block("f")
			switch tc.want {
			case "retry":
				require.NotNil(t, o.Start, "the block runs again")
				require.Equal(t, run.StatusRunning, h.r.Status)
			case "failed":
				require.Equal(t, run.StatusFailed, h.r.Status)
				require.Equal(t, run.BlockFailed, b.Status)
				require.Equal(t, tc.message, errorOf(t, o.Finish.Error)["message"])
			}
			require.LessOrEqual(t, b.Attempts, run.MaxAttemptsAnyKind)
			require.Equal(t, strings.Count(tc.script, "L")+strings.Count(tc.script, "R"), b.Lost)
		})
	}
}

// ---- hand back and lost attempts -------------------------------------------------------------

func TestHandBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, failDef, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	o = h.fail(1, *o.Start, "boom", at(1000))
	due := o.Retry.At

	// Another job's hand back does not touch the block, but a job continues the run anyway.
	o = h.apply(run.HandBack{JobEvent: job(9), Block: "f", At: due})
	require.Empty(t, o.Changed)
	require.Equal(t, 1, o.NewJobs)
	require.True(t, o.CompleteJob)

	o = h.apply(run.HandBack{JobEvent: run.JobEvent{Job: 1, Try: 1, Stopping: true}, Block: "f", At: due})
	require.Equal(t, []string{"f"}, o.Changed)
	require.Equal(t, 1, o.NewJobs)
	require.Equal(t, due, o.JobsAt)
	require.True(t, o.CompleteJob)
	require.Nil(t, o.Start)
	require.Empty(t, o.Changes)
	b := h.block("f")
	require.Equal(t, run.BlockPending, b.Status)
	require.True(t, b.RetryAt.IsZero())
	require.Equal(t, 1, b.Attempts)

	// The old job's RetryDue finds nothing; the fresh job runs attempt 2.
	require.Equal(t, run.Outcome{}, h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: due}))
	o = h.apply(run.Advance{JobEvent: job(2), Now: due})
	require.Equal(t, "f", o.Start.Block.ID)
	require.Equal(t, 2, o.Start.Attempt)
	require.Equal(t, int64(2), h.block("f").Job)

	// A hand back of a finished run only completes the job.
	h.apply(run.CancelRequested{Now: due.Add(time.Second)})
	o = h.apply(run.HandBack{JobEvent: job(2), Block: "f", At: due})
	require.Equal(t, run.Outcome{CompleteJob: true}, o)
}

func TestAttemptsLost(t *testing.T) {
	t.Parallel()
	// t -> a (log), t -> f (fail), t -> w (wait signal): three parallel blocks.
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"a","type":"log","params":{"message":"a"}},
		{"block_id":"f","type":"fail","params":{"message":"f"}},
		{"block_id":"w","type":"wait","params":{"signal":"go"}}
	],"edges":[{"block_id":"t","target_block_id":"a"},{"block_id":"t","target_block_id":"f"},{"block_id":"t","target_block_id":"w"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	require.Equal(t, 2, o.NewJobs)
	stA := *o.Start
	stF := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	stW := *h.apply(run.Advance{JobEvent: job(3), Now: at(1)}).Start
	require.Equal(t, []string{"a", "f", "w"}, []string{stA.Block.ID, stF.Block.ID, stW.Block.ID})
	o = h.fail(2, stF, "f", at(2)) // job 2 holds f between retries
	require.NotNil(t, o.Retry)
	o = h.apply(run.Suspended{JobEvent: job(3), Block: "w", AttemptID: stW.ID, Wait: run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}, Now: at(3)})
	require.True(t, o.CompleteJob)
	require.Equal(t, run.StatusRunning, h.r.Status, "a and f still run")

	// The replica of jobs 1 and 2 dies: a's attempt is lost, f (between retries) goes back too.
	o = h.apply(run.AttemptsLost{Attempts: []run.LostAttempt{{Block: "a", AttemptID: stA.ID, Replica: "r1"}}, DeadJobs: []int64{1, 2}, Now: at(10)})
	require.Equal(t, []string{"a", "f"}, o.Changed)
	require.Equal(t, []run.EndedAttempt{{ID: stA.ID, Block: "a", Status: "lost", Seq: 8,
		Error: json.RawMessage(`{"code":"lost","message":"replica r1 stopped heartbeating"}`)}}, o.Ended)
	require.Equal(t, 1, o.NewJobs)
	require.Nil(t, o.Start)
	require.Nil(t, o.Finish)
	require.Equal(t, run.BlockState{Status: run.BlockPending, Attempts: 1, Lost: 1, Job: 1, AttemptID: stA.ID}, h.block("a"))
	require.Equal(t, run.BlockPending, h.block("f").Status)
	require.True(t, h.block("f").RetryAt.IsZero())
	require.Equal(t, run.BlockWaiting, h.block("w").Status, "a wait is not lost")

	// The dead job's late result is dropped.
	require.Equal(t, run.Outcome{}, h.succeed(1, stA, `{}`, at(11)))

	// The fresh job takes a back (attempt 2), and f is given to another job.
	o = h.apply(run.Advance{JobEvent: job(4), Now: at(12)})
	require.Equal(t, "a", o.Start.Block.ID)
	require.Equal(t, 2, o.Start.Attempt)
	require.Equal(t, 1, o.NewJobs)
	o = h.apply(run.Advance{JobEvent: job(5), Now: at(12)})
	require.Equal(t, "f", o.Start.Block.ID)
	require.Equal(t, 2, o.Start.Attempt)
}

func TestAttemptsLostWakesAWaitingRun(t *testing.T) {
	t.Parallel()
	// A run waiting on a sleep: a dead job (holding nothing) puts it back to running, and
	// the fresh job finds it waiting again.
	h := newHarness(t, waitDef(`{"duration":"1h"}`), nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: o.Start.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(3_600_000)}, Now: at(1)})
	require.Equal(t, run.StatusWaiting, h.r.Status)
	o = h.apply(run.AttemptsLost{DeadJobs: []int64{1}, Now: at(5)})
	require.Equal(t, run.StatusRunning, h.r.Status)
	require.Equal(t, 1, o.NewJobs)
	require.Empty(t, o.Changed)
	o = h.apply(run.Advance{JobEvent: job(2), Now: at(6)})
	require.True(t, o.CompleteJob)
	require.Equal(t, run.StatusWaiting, h.r.Status)

	// Nothing lost: nothing happens.
	require.Equal(t, run.Outcome{}, h.apply(run.AttemptsLost{Now: at(7)}))
}

// A later try of a job takes back the blocks its earlier try held.
func TestReclaimOnLaterTry(t *testing.T) {
	t.Parallel()
	t.Run("attempt in flight", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, linearDef, map[string]any{"name": "x"})
		st := h.start()
		o := h.apply(run.Advance{JobEvent: run.JobEvent{Job: 1, Try: 2}, Now: at(500)})
		require.Len(t, o.Ended, 1)
		require.Equal(t, st.ID, o.Ended[0].ID)
		require.Equal(t, "lost", o.Ended[0].Status)
		require.Equal(t, "lost", errorOf(t, o.Ended[0].Error)["code"])
		require.Equal(t, "t", o.Start.Block.ID)
		require.Equal(t, 2, o.Start.Attempt)
		require.Equal(t, []string{"attempt.finished:t:lost", "attempt.started:t:running"}, kinds(o.Changes))
		require.Equal(t, []int64{3, 4}, seqs(o.Changes))
		require.Equal(t, 1, h.block("t").Lost)
		// The first try's result is dropped.
		require.Equal(t, run.Outcome{}, h.succeed(1, st, `{}`, at(501)))
	})
	t.Run("between retries", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, failDef, nil)
		o := h.succeed(1, h.start(), `{}`, at(0))
		o = h.fail(1, *o.Start, "boom", at(1))
		require.NotNil(t, o.Retry)
		o = h.apply(run.Advance{JobEvent: run.JobEvent{Job: 1, Try: 2}, Now: at(2)})
		require.Empty(t, o.Ended, "no attempt was in flight")
		require.Equal(t, 2, o.Start.Attempt)
		require.Zero(t, h.block("f").Lost)
	})
	t.Run("first try takes nothing back", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, linearDef, nil)
		h.start()
		o := h.apply(run.Advance{JobEvent: job(1), Now: at(1)})
		require.Equal(t, run.Outcome{CompleteJob: true}, o, "a first try finds the block running and leaves it")
	})
	t.Run("another job's blocks stay", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, linearDef, nil)
		h.start()
		o := h.apply(run.Advance{JobEvent: run.JobEvent{Job: 2, Try: 3}, Now: at(1)})
		require.Equal(t, run.Outcome{CompleteJob: true}, o)
	})
	t.Run("at the cap the run fails", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, linearDef, nil)
		h.start()
		var o run.Outcome
		for try := 2; try <= 11; try++ {
			o = h.apply(run.Advance{JobEvent: run.JobEvent{Job: 1, Try: try}, Now: at(int64(try))})
		}
		require.Equal(t, run.StatusFailed, h.r.Status)
		require.Equal(t, 10, h.block("t").Attempts)
		require.Equal(t, 10, h.block("t").Lost)
		require.True(t, o.CompleteJob)
		require.Nil(t, o.Start)
		require.Equal(t, "t", errorOf(t, o.Finish.Error)["block_id"])
	})
}

// ---- sleeps ------------------------------------------------------------------------------------

func TestSleep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, waitDef(`{"duration":"90s"}`), nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	st := *o.Start
	require.Equal(t, map[string]any{"duration": "90s"}, st.Params)

	wake := at(90_010)
	o = h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: st.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: wake}, Now: at(10)})
	want := run.Wait{Kind: run.WaitSleep, WakeAt: wake, Since: at(10), Seq: 4}
	require.Equal(t, []run.ArmedWait{{Block: "w", AttemptID: st.ID, Wait: want}}, o.Armed)
	require.Equal(t, []string{"wait.armed:w", "run.status:waiting"}, kinds(o.Changes))
	require.Equal(t, []int64{4, 5}, seqs(o.Changes))
	require.Equal(t, &want, o.Changes[0].Wait)
	require.Equal(t, &want, o.Changes[1].Wait)
	require.True(t, o.CompleteJob)
	require.Nil(t, o.Start)
	require.Empty(t, o.Ended, "the wait's attempt stays in flight")
	require.Equal(t, run.StatusWaiting, h.r.Status)
	b := h.block("w")
	require.Equal(t, run.BlockWaiting, b.Status)
	require.True(t, b.InFlight)
	require.Equal(t, &want, b.Wait)

	// Another block's timer changes nothing.
	require.Equal(t, run.Outcome{}, h.apply(run.TimerFired{Block: "after", Now: wake}))

	o = h.apply(run.TimerFired{Block: "w", Now: wake.Add(5 * time.Millisecond)})
	require.Equal(t, []string{"w"}, o.Released)
	require.Equal(t, 1, o.NewJobs)
	require.Nil(t, o.Start)
	require.Equal(t, []string{"wait.released:w", "attempt.finished:w:succeeded", "run.status:running"}, kinds(o.Changes))
	require.Equal(t, []int64{5, 6, 7}, seqs(o.Changes))
	require.Equal(t, []run.EndedAttempt{{ID: st.ID, Block: "w", Status: "succeeded", Output: json.RawMessage(`{"slept_ms":90005}`), Seq: 6}}, o.Ended)
	require.Equal(t, run.StatusRunning, h.r.Status)

	// A second firing finds the wait gone.
	require.Equal(t, run.Outcome{}, h.apply(run.TimerFired{Block: "w", Now: wake.Add(time.Second)}))

	// The fresh job continues the run with w's output in scope.
	o = h.apply(run.Advance{JobEvent: job(2), Now: wake.Add(10 * time.Millisecond)})
	require.Equal(t, "after", o.Start.Block.ID)
	require.Equal(t, map[string]any{"slept_ms": float64(90005)}, o.Start.Params["value"])
	o = h.succeed(2, *o.Start, `{"slept_ms":90005}`, wake.Add(20*time.Millisecond))
	require.Equal(t, run.StatusCompleted, h.r.Status)
	require.JSONEq(t, `{"after":{"slept_ms":90005}}`, string(o.Finish.Output))
}

// A sleep until a time already past still waits for its timer; slept_ms is never negative.
func TestSleepUntilThePast(t *testing.T) {
	t.Parallel()
	h := newHarness(t, waitDef(`{"until":"2020-01-01T00:00:00Z"}`), nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: o.Start.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(-1000)}, Now: at(10)})
	require.Equal(t, run.StatusWaiting, h.r.Status)
	o = h.apply(run.TimerFired{Block: "w", Now: at(5)})
	require.JSONEq(t, `{"slept_ms":0}`, string(o.Ended[0].Output))
}

// ---- signal waits ----------------------------------------------------------------------------------

func TestSignalWait(t *testing.T) {
	t.Parallel()
	suspend := func(h *harness, st run.StartAttempt, wr run.WaitRequest, buffered *run.Signal, now time.Time) run.Outcome {
		return h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: st.ID, Wait: wr, Buffered: buffered, Now: now})
	}
	t.Run("a buffered signal is consumed at once", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, waitDef(`{"signal":"go"}`), nil)
		o := h.succeed(1, h.start(), `{}`, at(0))
		st := *o.Start
		o = suspend(h, st, run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}, &run.Signal{ID: "sig_1", Name: "go", Payload: json.RawMessage(`{"k":1}`)}, at(5))
		require.Equal(t, &run.Consume{SignalID: "sig_1", AttemptID: st.ID}, o.Consume)
		require.Empty(t, o.Armed)
		require.False(t, o.Delivered)
		require.Equal(t, "after", o.Start.Block.ID, "the same job goes on")
		require.Equal(t, map[string]any{"signal": map[string]any{"name": "go", "payload": map[string]any{"k": float64(1)}}}, o.Start.Params["value"])
		require.Equal(t, []string{"attempt.finished:w:succeeded", "attempt.started:after:running"}, kinds(o.Changes))
		require.Equal(t, run.StatusRunning, h.r.Status)
	})
	t.Run("a signal releases the wait", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, waitDef(`{"signal":"go"}`), nil)
		o := h.succeed(1, h.start(), `{}`, at(0))
		st := *o.Start
		o = suspend(h, st, run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}, nil, at(5))
		want := run.Wait{Kind: run.WaitSignal, Signal: "go", Since: at(5), Seq: 4}
		require.Equal(t, []run.ArmedWait{{Block: "w", AttemptID: st.ID, Wait: want}}, o.Armed)
		require.Equal(t, run.StatusWaiting, h.r.Status)

		// Another name stays buffered.
		o, err := h.applyErr(run.SignalArrived{Signal: run.Signal{ID: "sig_1", Name: "other"}, Now: at(6)})
		require.NoError(t, err)
		require.Equal(t, run.Outcome{}, o)
		require.False(t, o.Delivered)

		o = h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_2", Name: "go", Payload: json.RawMessage(`[1,2]`)}, Now: at(7)})
		require.True(t, o.Delivered)
		require.Equal(t, &run.Consume{SignalID: "sig_2", AttemptID: st.ID}, o.Consume)
		require.Equal(t, []string{"w"}, o.Released)
		require.Equal(t, 1, o.NewJobs)
		require.JSONEq(t, `{"signal":{"name":"go","payload":[1,2]}}`, string(o.Ended[0].Output))
		require.Equal(t, []string{"wait.released:w", "attempt.finished:w:succeeded", "run.status:running"}, kinds(o.Changes))

		// A second signal of the name now stays buffered.
		o = h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_3", Name: "go"}, Now: at(8)})
		require.False(t, o.Delivered)
		require.Nil(t, o.Consume)
	})
	t.Run("a timeout", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, waitDef(`{"signal":"go","timeout":"10m"}`), nil)
		o := h.succeed(1, h.start(), `{}`, at(0))
		st := *o.Start
		o = suspend(h, st, run.WaitRequest{Kind: run.WaitSignal, Signal: "go", Timeout: 10 * time.Minute}, nil, at(5))
		require.Equal(t, at(5).Add(10*time.Minute), o.Armed[0].Wait.WakeAt)
		o = h.apply(run.TimerFired{Block: "w", Now: at(5).Add(10 * time.Minute)})
		require.Equal(t, []string{"w"}, o.Released)
		require.JSONEq(t, `{"timed_out":true}`, string(o.Ended[0].Output))
		require.Nil(t, o.Consume)
		// A signal after the timeout stays buffered.
		o = h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_1", Name: "go"}, Now: at(5).Add(11 * time.Minute)})
		require.False(t, o.Delivered)
	})
	t.Run("no timer without a timeout", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, waitDef(`{"signal":"go"}`), nil)
		o := h.succeed(1, h.start(), `{}`, at(0))
		suspend(h, *o.Start, run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}, nil, at(5))
		require.Equal(t, run.Outcome{}, h.apply(run.TimerFired{Block: "w", Now: at(5).Add(time.Hour)}))
		require.Equal(t, run.StatusWaiting, h.r.Status)
	})
	t.Run("a signal before the wait began", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, waitDef(`{"signal":"go"}`), nil)
		o := h.succeed(1, h.start(), `{}`, at(0))
		// The wait's attempt runs but has not suspended yet: the signal is buffered...
		o2 := h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_1", Name: "go"}, Now: at(1)})
		require.False(t, o2.Delivered)
		// ... and the engine hands it to the wait as it suspends.
		o = suspend(h, *o.Start, run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}, &run.Signal{ID: "sig_1", Name: "go"}, at(2))
		require.Equal(t, "sig_1", o.Consume.SignalID)
		require.JSONEq(t, `{"signal":{"name":"go","payload":null}}`, string(o.Ended[0].Output))
	})
	t.Run("finished run", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, waitDef(`{"signal":"go"}`), nil)
		h.start()
		h.apply(run.CancelRequested{Now: at(1)})
		_, err := h.applyErr(run.SignalArrived{Signal: run.Signal{ID: "sig_1", Name: "go"}, Now: at(2)})
		var fe *run.FinishedError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, run.StatusCancelled, fe.Status)
	})
}

func TestSignalOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		payload string
		want    string
	}{
		{`{"a":1}`, `{"signal":{"name":"n","payload":{"a":1}}}`},
		{`12345678901234567890123`, `{"signal":{"name":"n","payload":12345678901234567890123}}`},
		{``, `{"signal":{"name":"n","payload":null}}`},
		{`not json`, `{"signal":{"name":"n","payload":null}}`},
		{`"s"`, `{"signal":{"name":"n","payload":"s"}}`},
	}
	for _, tc := range tests {
		out := string(run.SignalOutput("n", json.RawMessage(tc.payload)))
		require.JSONEq(t, tc.want, out, tc.payload)
		require.Equal(t, tc.want, out, "the payload goes in as stored")
	}
}

// twoWaitsDef: t -> x (log) -> b (wait go); t -> a (wait go). b comes first in definition
// order, so that a release by definition order and one by age differ.
const twoWaitsDef = `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"b","type":"wait","params":{"signal":"go"}},
	{"block_id":"x","type":"log","params":{"message":"x"}},
	{"block_id":"a","type":"wait","params":{"signal":"go"}}
],"edges":[{"block_id":"t","target_block_id":"x"},{"block_id":"x","target_block_id":"b"},{"block_id":"t","target_block_id":"a"}]}`

// A signal releases the oldest wait on its name.
func TestSignalReleasesTheOldestWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, twoWaitsDef, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	require.Equal(t, "x", o.Start.Block.ID)
	stX := *o.Start
	stA := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	require.Equal(t, "a", stA.Block.ID)
	goWait := run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}
	h.apply(run.Suspended{JobEvent: job(2), Block: "a", AttemptID: stA.ID, Wait: goWait, Now: at(2)})
	o = h.succeed(1, stX, `{}`, at(3))
	stB := *o.Start
	h.apply(run.Suspended{JobEvent: job(1), Block: "b", AttemptID: stB.ID, Wait: goWait, Now: at(4)})
	require.Less(t, h.block("a").Wait.Seq, h.block("b").Wait.Seq)
	require.Equal(t, run.StatusWaiting, h.r.Status)

	o = h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_1", Name: "go"}, Now: at(5)})
	require.Equal(t, []string{"a"}, o.Released, "a waited first")
	require.Equal(t, stA.ID, o.Consume.AttemptID)
	o = h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_2", Name: "go"}, Now: at(6)})
	require.Equal(t, []string{"b"}, o.Released)
}

// sameSeqWaits builds a run with two waits on signal "go" armed with no attempt change
// between them (both attempts began before either suspended, as parallel wait blocks do), so
// that both have the same Wait.Seq: b suspends at t0+1s, a at t0+2s, though a comes first in
// definition order.
func sameSeqWaits(t *testing.T) (*harness, run.Outcome) {
	t.Helper()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"a","type":"wait","params":{"signal":"go"}},
		{"block_id":"b","type":"wait","params":{"signal":"go"}}
	],"edges":[{"block_id":"t","target_block_id":"a"},{"block_id":"t","target_block_id":"b"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	stA := *o.Start
	stB := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	goWait := run.WaitRequest{Kind: run.WaitSignal, Signal: "go"}
	h.apply(run.Suspended{JobEvent: job(2), Block: "b", AttemptID: stB.ID, Wait: goWait, Now: at(1000)})
	o = h.apply(run.Suspended{JobEvent: job(1), Block: "a", AttemptID: stA.ID, Wait: goWait, Now: at(2000)})
	require.Equal(t, run.StatusWaiting, h.r.Status)
	require.Equal(t, h.block("a").Wait.Seq, h.block("b").Wait.Seq, "the two waits share a Seq")
	return h, o
}

// BUG (reported): a signal must release the oldest wait on its name. With two waits armed at
// the same Seq, the interpreter releases the first in definition order (a), not the one that
// has waited longer (b).
func TestSignalReleasesTheOldestWaitArmedAtTheSameSeq(t *testing.T) {
	t.Parallel()
	h, _ := sameSeqWaits(t)
	o := h.apply(run.SignalArrived{Signal: run.Signal{ID: "sig_1", Name: "go"}, Now: at(3000)})
	require.Equal(t, []string{"b"}, o.Released, "b has waited since %v, a only since %v", at(1000), at(2000))
}

// BUG (reported): the run.status "waiting" change names the wait armed first. With two waits
// at the same Seq, the interpreter picks one by map iteration order: the same events give a
// different change from one run to the next (a pure interpreter that is not deterministic).
func TestWaitingChangeNamesTheWaitArmedFirst(t *testing.T) {
	t.Parallel()
	seen := map[time.Time]int{}
	for range 64 {
		_, o := sameSeqWaits(t)
		seen[o.Changes[len(o.Changes)-1].Wait.Since]++
	}
	require.Equal(t, map[time.Time]int{at(1000): 64}, seen, "the waiting run names b (armed at t0+1s) every time")
}

// ---- cancel ----------------------------------------------------------------------------------------

func TestCancel(t *testing.T) {
	t.Parallel()
	// t -> a (log, in flight), t -> f (fail, between retries), t -> w (wait, suspended), t -> p -> q.
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"a","type":"log","params":{"message":"a"}},
		{"block_id":"f","type":"fail","params":{"message":"f"}},
		{"block_id":"w","type":"wait","params":{"duration":"1h"}},
		{"block_id":"p","type":"log","params":{"message":"p"}},
		{"block_id":"q","type":"log","params":{"message":"q"}}
	],"edges":[{"block_id":"t","target_block_id":"a"},{"block_id":"t","target_block_id":"f"},{"block_id":"t","target_block_id":"w"},
		{"block_id":"t","target_block_id":"p"},{"block_id":"p","target_block_id":"q"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	require.Equal(t, 3, o.NewJobs)
	stA := *o.Start
	stF := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	stW := *h.apply(run.Advance{JobEvent: job(3), Now: at(1)}).Start
	stP := *h.apply(run.Advance{JobEvent: job(4), Now: at(1)}).Start
	require.Equal(t, "p", stP.Block.ID)
	h.fail(2, stF, "f", at(2))
	h.apply(run.Suspended{JobEvent: job(3), Block: "w", AttemptID: stW.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(3_600_000)}, Now: at(3)})
	seq := h.r.Seq

	o = h.apply(run.CancelRequested{Now: at(10)})
	require.Equal(t, run.StatusCancelled, h.r.Status)
	require.Equal(t, &run.Finish{Status: run.StatusCancelled}, o.Finish)
	require.True(t, o.CancelJobs)
	require.True(t, o.ReleaseAll)
	require.Nil(t, o.Start)
	require.Zero(t, o.NewJobs)
	require.Equal(t, []string{"a", "f", "w", "p"}, o.Changed)
	ended := map[string]string{}
	for _, e := range o.Ended {
		ended[e.ID] = e.Status
		require.JSONEq(t, `{"message":"run cancelled"}`, string(e.Error))
	}
	require.Equal(t, map[string]string{stA.ID: "cancelled", stW.ID: "cancelled", stP.ID: "cancelled"}, ended,
		"the attempts in flight (steps and waits) end cancelled; f between retries has none")
	require.Equal(t, []string{"attempt.finished:a:cancelled", "attempt.finished:w:cancelled", "attempt.finished:p:cancelled", "run.status:cancelled"}, kinds(o.Changes))
	require.Equal(t, []int64{seq + 1, seq + 2, seq + 3, seq + 4}, seqs(o.Changes))
	require.True(t, h.block("f").RetryAt.IsZero())
	for id, b := range h.r.State.Blocks {
		require.False(t, b.InFlight, id)
	}

	// Results of attempts that were in flight are dropped; nothing starts.
	require.Equal(t, run.Outcome{}, h.succeed(1, stA, `{}`, at(11)))
	require.Equal(t, run.Outcome{}, h.succeed(4, stP, `{}`, at(11)))
	require.Equal(t, run.Outcome{}, h.fail(1, stA, "x", at(11)))
	require.Equal(t, run.Outcome{}, h.apply(run.RetryDue{JobEvent: job(2), Block: "f", Now: at(100)}))
	require.Equal(t, run.Outcome{}, h.apply(run.TimerFired{Block: "w", Now: at(3_600_000)}))
	require.Equal(t, run.Outcome{CompleteJob: true}, h.apply(run.Advance{JobEvent: job(5), Now: at(12)}))
	require.Equal(t, run.Outcome{CompleteJob: true}, h.apply(run.Advance{JobEvent: run.JobEvent{Job: 1, Try: 2}, Now: at(12)}))

	// Cancelling again is a no-op.
	o, err := h.applyErr(run.CancelRequested{Now: at(20)})
	require.NoError(t, err)
	require.Equal(t, run.Outcome{}, o)
	require.Equal(t, run.StatusCancelled, h.r.Status)
}

func TestCancelOfAFinishedRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		finish func(h *harness)
		status run.Status
	}{
		{"completed", func(h *harness) {
			o := h.succeed(1, h.start(), `{}`, at(0))
			h.succeed(1, *o.Start, `{}`, at(1))
		}, run.StatusCompleted},
		{"failed", func(h *harness) {
			o := h.succeed(1, h.start(), `{}`, at(0))
			h.fail(1, *o.Start, "x", at(1))
		}, run.StatusFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, linearDef, nil)
			tc.finish(h)
			require.Equal(t, tc.status, h.r.Status)
			before := snapshot(h.r)
			o, err := h.applyErr(run.CancelRequested{Now: at(5)})
			var fe *run.FinishedError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.status, fe.Status)
			require.Equal(t, run.Outcome{}, o)
			require.Equal(t, tc.status, h.r.Status)
			require.Equal(t, before, snapshot(h.r))
			_, err = h.applyErr(run.SignalArrived{Signal: run.Signal{ID: "s", Name: "n"}, Now: at(6)})
			require.ErrorAs(t, err, &fe)
		})
	}
}

func TestCancelOfAQueuedRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, linearDef, nil)
	o := h.apply(run.CancelRequested{Now: at(1)})
	require.Equal(t, run.StatusCancelled, h.r.Status)
	require.Empty(t, o.Ended)
	require.Equal(t, []string{"run.status:cancelled"}, kinds(o.Changes))
	require.Equal(t, []int64{1}, seqs(o.Changes))
	require.Equal(t, run.Outcome{CompleteJob: true}, h.apply(run.Advance{JobEvent: job(1), Now: at(2)}))
}

// A step failing its last attempt fails the run: the other attempts in flight end cancelled,
// and nothing else starts.
func TestFailureStopsTheOtherBranches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fanDef, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	stA := *o.Start
	stB := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	o = h.fail(1, stA, "a broke", at(2))
	require.Equal(t, run.StatusFailed, h.r.Status)
	require.Equal(t, []string{"a", "b"}, o.Changed)
	require.Equal(t, []string{"attempt.finished:a:failed", "attempt.finished:b:cancelled", "run.status:failed"}, kinds(o.Changes))
	require.JSONEq(t, `{"block_id":"a","message":"a broke"}`, string(o.Finish.Error))
	require.True(t, o.CompleteJob)
	require.Equal(t, run.Outcome{CompleteJob: true}, h.apply(run.Advance{JobEvent: job(3), Now: at(3)}), "c never starts")
	require.Equal(t, run.Outcome{}, h.succeed(2, stB, `{}`, at(4)))
}

// ---- parallel fan-out and joins --------------------------------------------------------------------

func TestParallelFanOutAndJoin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fanDef, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	require.Equal(t, 2, o.NewJobs, "three blocks ready: the job takes one, two more jobs")
	require.Zero(t, o.JobsAt)
	require.Equal(t, "a", o.Start.Block.ID)
	require.Equal(t, []string{"t", "b", "c", "a"}, o.Changed, "b and c record that a job was queued for them")
	require.True(t, h.r.State.Blocks["b"].Queued)
	stA := *o.Start

	// Job 2 takes b. c is still ready (job 3 has not come yet) but a job is queued for it
	// already: no more jobs.
	o = h.apply(run.Advance{JobEvent: job(2), Now: at(1)})
	require.Equal(t, "b", o.Start.Block.ID)
	require.Zero(t, o.NewJobs)
	require.False(t, h.r.State.Blocks["b"].Queued)
	stB := *o.Start

	// a finishes before c's job came: job 1 takes c, and job 3 finds nothing to do.
	o = h.succeed(1, stA, `"A"`, at(2))
	require.Equal(t, "c", o.Start.Block.ID)
	require.Zero(t, o.NewJobs)
	stC := *o.Start
	o = h.apply(run.Advance{JobEvent: job(3), Now: at(3)})
	require.Equal(t, run.Outcome{CompleteJob: true}, o)
	require.Equal(t, run.StatusRunning, h.r.Status)

	// The join waits for all its upstream blocks; the job finishing the last one runs it.
	o = h.succeed(1, stC, `"C"`, at(4))
	require.Nil(t, o.Start)
	require.True(t, o.CompleteJob)
	require.Equal(t, []string{"c"}, o.Changed)
	o = h.succeed(2, stB, `"B"`, at(5))
	require.Equal(t, "j", o.Start.Block.ID)
	require.Equal(t, []any{"A", "B", "C"}, o.Start.Params["value"])
	o = h.succeed(2, *o.Start, `["A","B","C"]`, at(6))
	require.JSONEq(t, `{"j":["A","B","C"]}`, string(o.Finish.Output))
}

// Parallel sinks: the output has every sink that ran; the run completes only when the last
// one is done.
func TestParallelSinks(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"a","type":"transform","params":{"value":1}},
		{"block_id":"b","type":"transform","params":{"value":2}}
	],"edges":[{"block_id":"t","target_block_id":"a"},{"block_id":"t","target_block_id":"b"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	stA := *o.Start
	stB := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	o = h.succeed(2, stB, `2`, at(2))
	require.Nil(t, o.Finish)
	require.True(t, o.CompleteJob)
	o = h.succeed(1, stA, `1`, at(3))
	require.JSONEq(t, `{"a":1,"b":2}`, string(o.Finish.Output))
}

// A wait and a step in parallel: the run is waiting only once no step runs.
func TestWaitingOnlyWhenNothingRuns(t *testing.T) {
	t.Parallel()
	const def = `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"w","type":"wait","params":{"duration":"1m"}},
		{"block_id":"a","type":"log","params":{"message":"a"}}
	],"edges":[{"block_id":"t","target_block_id":"w"},{"block_id":"t","target_block_id":"a"}]}`
	h := newHarness(t, def, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	stW := *o.Start
	stA := *h.apply(run.Advance{JobEvent: job(2), Now: at(1)}).Start
	o = h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: stW.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(60_000)}, Now: at(2)})
	require.Equal(t, run.StatusRunning, h.r.Status)
	require.Equal(t, []string{"wait.armed:w"}, kinds(o.Changes))
	o = h.succeed(2, stA, `{}`, at(3))
	require.Equal(t, run.StatusWaiting, h.r.Status)
	require.Equal(t, []string{"attempt.finished:a:succeeded", "run.status:waiting"}, kinds(o.Changes))
	o = h.apply(run.TimerFired{Block: "w", Now: at(60_000)})
	require.Equal(t, 1, o.NewJobs)
	o = h.apply(run.Advance{JobEvent: job(3), Now: at(60_001)})
	require.Equal(t, run.StatusCompleted, h.r.Status)
	require.JSONEq(t, `{"w":{"slept_ms":59998},"a":{}}`, string(o.Finish.Output))
}

// ---- results that no longer apply --------------------------------------------------------------------

func TestStaleResultsAreIgnored(t *testing.T) {
	t.Parallel()
	type stale func(h *harness, st run.StartAttempt) run.Event
	tests := []struct {
		name string
		ev   stale
	}{
		{"succeeded from another job", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(2), Block: "a", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"succeeded of another attempt", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(1), Block: "a", AttemptID: "att_99", Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"succeeded of another block", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(1), Block: "t", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"succeeded of an unknown block", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(1), Block: "nope", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"failed from another job", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Failed{JobEvent: job(2), Block: "a", AttemptID: st.ID, Message: "x", Now: at(9)}
		}},
		{"failed of an earlier attempt", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.Failed{JobEvent: job(1), Block: "t", AttemptID: "att_1", Message: "x", Now: at(9)}
		}},
		{"suspended from another job", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Suspended{JobEvent: job(2), Block: "a", AttemptID: st.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(100)}, Now: at(9)}
		}},
		{"suspended with a stale signal", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.Suspended{JobEvent: job(1), Block: "t", AttemptID: "att_1", Wait: run.WaitRequest{Kind: run.WaitSignal, Signal: "s"},
				Buffered: &run.Signal{ID: "sig_1", Name: "s"}, Now: at(9)}
		}},
		{"timer of a block that is not waiting", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.TimerFired{Block: "a", Now: at(9)}
		}},
		{"timer of an unknown block", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.TimerFired{Block: "nope", Now: at(9)}
		}},
		{"retry due of a block in flight", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.RetryDue{JobEvent: job(1), Block: "a", Now: at(9)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, linearDef, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			st := *o.Start
			before, seq := snapshot(h.r), h.r.Seq
			o = h.apply(tc.ev(h, st))
			require.Equal(t, run.Outcome{}, o)
			require.Equal(t, before, snapshot(h.r))
			require.Equal(t, seq, h.r.Seq)
			require.Equal(t, run.StatusRunning, h.r.Status)
		})
	}
}

// ---- changes and their sequence ---------------------------------------------------------------------

// The changes of a whole run, in order: every attempt change takes the next sequence, the
// other kinds carry the latest attempt change's.
func TestChangesOfAWholeRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"f","type":"fail","params":{"message":"x","fail_attempts":1}},
		{"block_id":"w","type":"wait","params":{"duration":"1s"}}
	],"edges":[{"block_id":"t","target_block_id":"f"},{"block_id":"f","target_block_id":"w"}]}`, nil)
	var all []run.Change
	var changed [][]string
	record := func(o run.Outcome) run.Outcome {
		all = append(all, o.Changes...)
		changed = append(changed, o.Changed)
		return o
	}
	o := record(h.apply(run.Advance{JobEvent: job(1), Now: at(0)}))
	o = record(h.succeed(1, *o.Start, `{}`, at(1)))
	o = record(h.fail(1, *o.Start, "x", at(2)))
	o = record(h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At}))
	o = record(h.succeed(1, *o.Start, `{"ok":true}`, at(200)))
	record(h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: o.Start.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(1200)}, Now: at(201)}))
	record(h.apply(run.TimerFired{Block: "w", Now: at(1200)}))
	record(h.apply(run.Advance{JobEvent: job(2), Now: at(1201)}))

	require.Equal(t, []string{
		"attempt.started:t:running", "run.status:running",
		"attempt.finished:t:succeeded", "attempt.started:f:running",
		"attempt.finished:f:failed", "retry.scheduled:f",
		"attempt.started:f:running",
		"attempt.finished:f:succeeded", "attempt.started:w:running",
		"wait.armed:w", "run.status:waiting",
		"wait.released:w", "attempt.finished:w:succeeded", "run.status:running",
		"run.status:completed",
	}, kinds(all))
	require.Equal(t, []int64{1, 2, 3, 4, 5, 5, 6, 7, 8, 8, 9, 9, 10, 11, 12}, seqs(all))
	require.Equal(t, [][]string{{"t"}, {"t", "f"}, {"f"}, {"f"}, {"f", "w"}, {"w"}, {"w"}, nil}, changed)
	require.Equal(t, int64(12), h.r.Seq)
	for _, c := range all {
		require.Equal(t, "run_1", c.RunID)
		require.Equal(t, "org_1", c.OrganizationID)
		require.Equal(t, "wf_1", c.WorkflowID)
	}
	require.Equal(t, at(1201), all[len(all)-1].At)
}

// Outcome.Changed lists exactly the blocks whose stored state changed, whatever the event
// (the tracker checks it after every event of every test; here a few cases by name).
func TestChangedListsExactlyTheBlocksThatChanged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, branchDef, map[string]any{"n": 1})
	o := h.succeed(1, h.start(), `{}`, at(0))
	require.Equal(t, []string{"t", "c"}, o.Changed)
	o = h.succeed(1, *o.Start, `{"result":false}`, at(1))
	require.Equal(t, []string{"c", "yes", "no"}, o.Changed, "c succeeded, yes skipped, no started")
	before := snapshot(h.r)
	require.Empty(t, h.apply(run.SignalArrived{Signal: run.Signal{ID: "s", Name: "x"}, Now: at(2)}).Changed)
	require.Equal(t, before, snapshot(h.r))
}
