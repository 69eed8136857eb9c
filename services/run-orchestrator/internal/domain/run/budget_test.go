package run_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors/expression"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Tests of the expression budget as the interpreter applies it (issue 21): one budget per
// attempt's resolution, the small inline one in the transaction, the full one in the worker.

func budgetRun(t *testing.T, value any, input any) (*run.Interpreter, *run.Run) {
	t.Helper()
	raw, err := json.Marshal(value)
	require.NoError(t, err)
	def := parseDef(t, `{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}},
		{"block_id":"t","type":"transform","params":{"value":`+string(raw)+`}}],
		"edges":[{"block_id":"start","target_block_id":"t"}]}`)
	in := run.NewInterpreter(catalog(), run.NewTemplates(run.EvalLimits{Full: expression.Limits{Timeout: 500 * time.Millisecond, Bytes: 4 << 20}}), idCounter())
	return in, newRun(def, input)
}

// begin applies the run's first events until the transform's attempt is begun.
func beginTransform(t *testing.T, in *run.Interpreter, r *run.Run) run.StartAttempt {
	t.Helper()
	o, err := in.Apply(r, run.Advance{JobEvent: run.JobEvent{Job: 1, Try: 1}, Now: t0})
	require.NoError(t, err)
	require.NotNil(t, o.Start)
	o, err = in.Apply(r, run.Succeeded{JobEvent: run.JobEvent{Job: 1, Try: 1}, Block: "start", AttemptID: o.Start.ID, Output: json.RawMessage(`{}`), Now: t0})
	require.NoError(t, err)
	require.NotNil(t, o.Start)
	require.Equal(t, "t", o.Start.Block.ID)
	return *o.Start
}

func requireCode(t *testing.T, err error, code string) {
	t.Helper()
	le := expression.AsLimit(err)
	require.NotNil(t, le, "%v", err)
	require.Equal(t, code, le.Code)
}

// TestRepeatBombFailsTheAttempt: the nested repeat asked the runtime for ~100 GB and killed
// the process. It is refused before it allocates, with the code, and the heap stays small.
func TestRepeatBombFailsTheAttempt(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	in, r := budgetRun(t, "{{ repeat(repeat('a', 999999), 100000) }}", nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	begun := time.Now()
	st := beginTransform(t, in, r)
	require.True(t, st.Deferred, "over the inline budget: left to the worker")
	require.NoError(t, st.ParamErr)
	require.Equal(t, "{{ repeat(repeat('a', 999999), 100000) }}", st.Params["value"], "recorded as written until resolved")
	st = st.Prepare()
	runtime.ReadMemStats(&after)
	require.True(t, st.Resolved)
	requireCode(t, st.ParamErr, expression.CodeBudgetExceeded)
	require.Contains(t, st.ParamErr.Error(), "param value")
	require.Less(t, time.Since(begun), time.Second)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "allocated %d MiB", (after.TotalAlloc-before.TotalAlloc)>>20)
}

// TestBudgetIsSharedByEverySegmentAndParam: each {{ }} had a fresh budget, so a param of many
// segments, or many params, had no total bound.
func TestBudgetIsSharedByEverySegmentAndParam(t *testing.T) {
	t.Parallel()
	seg := "{{ repeat('a', 1000000) }}" // 1 MB, under the full 4 MiB alone
	in, r := budgetRun(t, map[string]any{"one": seg + seg, "two": seg + seg, "three": seg}, nil)
	st := beginTransform(t, in, r).Prepare()
	require.Error(t, st.ParamErr)
	le := expression.AsLimit(st.ParamErr)
	require.NotNil(t, le)
	require.Contains(t, []string{expression.CodeBudgetExceeded, expression.CodeOutputTooLarge}, le.Code)

	// References to a large value cost nothing to evaluate, but what they produce is bounded.
	big := strings.Repeat("x", 1<<20)
	in, r = budgetRun(t, []any{"{{ input }}", "{{ input }}", "{{ input }}", "{{ input }}", "{{ input }}"}, big)
	st = beginTransform(t, in, r)
	require.True(t, st.Deferred)
	st = st.Prepare()
	requireCode(t, st.ParamErr, expression.CodeOutputTooLarge)
}

// TestInlineBudgetDefersToTheWorker: params over the small inline budget are not evaluated
// further in the transaction; Prepare resolves them under the full budget.
func TestInlineBudgetDefersToTheWorker(t *testing.T) {
	t.Parallel()
	items := make([]any, 20000)
	for i := range items {
		items[i] = float64(1)
	}
	in, r := budgetRun(t, "{{ reduce(input.a, #acc + #, 0) }}", map[string]any{"a": items})
	st := beginTransform(t, in, r)
	require.True(t, st.Deferred)
	st = st.Prepare()
	require.NoError(t, st.ParamErr)
	require.True(t, st.Resolved)
	require.Equal(t, float64(20000), st.Params["value"])

	// An ordinary one is resolved at once.
	in, r = budgetRun(t, "{{ len(input.a) }}", map[string]any{"a": items})
	st = beginTransform(t, in, r)
	require.False(t, st.Deferred)
	require.Equal(t, 20000, st.Params["value"])
	require.False(t, st.Prepare().Resolved)

	// The quadratic reduce stops on the full budget's time.
	in, r = budgetRun(t, "{{ reduce(input.a, reduce(input.a, #acc + 1, 0), 0) }}", map[string]any{"a": items})
	begun := time.Now()
	st = beginTransform(t, in, r)
	require.True(t, st.Deferred)
	require.Less(t, time.Since(begun), 100*time.Millisecond, "the transaction's share is small")
	st = st.Prepare()
	requireCode(t, st.ParamErr, expression.CodeBudgetExceeded)
	require.Less(t, time.Since(begun), 2*time.Second)
}

// TestResolvedInputReplacesTheRecordedOne: the result of a deferred attempt carries its
// resolved params, which the outcome asks to record.
func TestResolvedInputReplacesTheRecordedOne(t *testing.T) {
	t.Parallel()
	in, r := budgetRun(t, "{{ input.n }}", map[string]any{"n": float64(1)})
	st := beginTransform(t, in, r)
	o, err := in.Apply(r, run.Succeeded{JobEvent: run.JobEvent{Job: 1, Try: 1}, Block: "t", AttemptID: st.ID,
		Output: json.RawMessage(`1`), Input: json.RawMessage(`{"value":1}`), Now: t0})
	require.NoError(t, err)
	require.Equal(t, []run.AttemptInput{{ID: st.ID, Input: json.RawMessage(`{"value":1}`)}}, o.Inputs)
}
