package run_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func TestStateAdvance(t *testing.T) {
	t.Parallel()

	def := run.Definition{
		Blocks: []run.Block{{ID: "t"}, {ID: "c"}, {ID: "yes"}, {ID: "no"}, {ID: "after_no"}, {ID: "join"}},
		Edges: []run.Edge{
			{From: "t", To: "c"},
			{From: "c", To: "yes", Branch: "true"},
			{From: "c", To: "no", Branch: "false"},
			{From: "no", To: "after_no"},
			{From: "yes", To: "join"},
			{From: "after_no", To: "join"},
		},
	}
	s, err := run.ParseState(nil)
	require.NoError(t, err)
	ready := func() []string {
		r, _ := s.Advance(def)
		return r
	}
	require.Equal(t, []string{"t"}, ready())

	s.Block("t").Status = run.BlockSucceeded
	require.Equal(t, []string{"c"}, ready())

	s.Block("c").Status = run.BlockSucceeded
	s.Block("c").Output = json.RawMessage(`{"result":true}`)
	require.Equal(t, []string{"yes"}, ready())
	require.Equal(t, run.BlockSkipped, s.Block("no").Status)
	require.Equal(t, run.BlockSkipped, s.Block("after_no").Status, "descendants of a skipped block are skipped")

	s.Block("yes").Status = run.BlockSucceeded
	require.Equal(t, []string{"join"}, ready(), "one taken edge is enough")

	s.Block("join").Status = run.BlockSucceeded
	s.Block("join").Output = json.RawMessage(`1`)
	require.Empty(t, ready())
	require.Equal(t, map[string]json.RawMessage{"join": json.RawMessage(`1`)}, s.Output(def))
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
