package run_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Tests of the pure interpreter. Every
// event of every test goes through tracker.apply, which checks the invariants that hold after
// any Apply (the fuzz target and the property test use the same checker).

// ---- fixtures ------------------------------------------------------------------------------

// t0 is the fixed time the tests' events happen at (no clock is read anywhere).
var t0 = time.Date(2026, time.November, 22, 2, 6, 44, 537_000_000, time.UTC)

// at is t0 plus n milliseconds.
func at(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// Retry policies as the catalog gives them to fail and http.request.
var (
	policyFail = run.RetryPolicy{MaxAttempts: 3, InitialIntervalMS: 100, BackoffCoefficient: 2, MaxIntervalMS: 1000}
	policyHTTP = run.RetryPolicy{MaxAttempts: 3, InitialIntervalMS: 500, BackoffCoefficient: 2, MaxIntervalMS: 10000}
)

// catalog is the interpreter's view of the built-in connectors, as the engine builds it from
// their catalog entries and runtimes, on a server that sets http.request's hidden
// allow_private_network (to false: private targets refused).
func catalog() map[string]run.Connector {
	c := run.Connectors(connectors.MustLoad(), builtin.All(), connectors.Config{})
	http := c["http.request"]
	http.Extra = map[string]any{"allow_private_network": false}
	c["http.request"] = http
	return c
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
	return run.NewInterpreter(catalog(), run.NewTemplates(run.EvalLimits{}), idCounter())
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

func TestAYieldedLastStepFinishesTheRunInPlace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, linearDef, map[string]any{"name": "x"})
	st := h.start()
	o := h.apply(run.Succeeded{JobEvent: run.JobEvent{Job: 1, Try: 1, Yield: true}, Block: "t", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(1)})
	require.Nil(t, o.Start, "a yielding worker starts no next block")
	require.Equal(t, 1, o.NewJobs, "a fresh job continues the run in its turn")
	require.Equal(t, run.BlockPending, h.r.State.Block("a").Status)

	// The fresh job runs the last block and yields too: nothing is left to start, so the run
	// finishes in the same transaction rather than in a third job's turn.
	o = h.apply(run.Advance{JobEvent: job(2), Now: at(2)})
	require.NotNil(t, o.Start)
	o = h.apply(run.Succeeded{JobEvent: run.JobEvent{Job: 2, Try: 1, Yield: true}, Block: "a", AttemptID: o.Start.ID,
		Output: json.RawMessage(`{"message":"hello x"}`), Now: at(3)})
	require.Zero(t, o.NewJobs)
	require.True(t, o.CompleteJob)
	require.NotNil(t, o.Finish)
	require.Equal(t, run.StatusCompleted, o.Finish.Status)
	require.Equal(t, run.StatusCompleted, h.r.Status)
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
