package run_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The bounds of issue 21 on what a run keeps: an attempt's output, an error message, the run's
// output; and failures a retry would repeat are not retried.

// limitsHarness is a harness whose interpreter has small bounds.
func limitsHarness(t *testing.T, def string, l run.Limits) *harness {
	t.Helper()
	h := newHarness(t, def, nil)
	h.in = run.NewInterpreter(catalog(), run.NewTemplates(run.EvalLimits{}), idCounter(), run.WithLimits(l))
	return h
}

// bigOutput is an output of about n bytes of JSON.
func bigOutput(n int) string {
	raw, _ := json.Marshal(map[string]any{"s": strings.Repeat("x", n)})
	return string(raw)
}

func TestAttemptOutputBound(t *testing.T) {
	t.Parallel()

	t.Run("OverTheBoundFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		// fail's policy allows 3 attempts: a too large output is not retried.
		h := limitsHarness(t, failDef, run.Limits{AttemptOutput: 1000})
		o := h.succeed(1, h.start(), `{}`, at(0))
		o = h.succeed(1, *o.Start, bigOutput(1001), at(10))
		require.Nil(t, o.Retry)
		require.Nil(t, o.Start)
		require.Equal(t, run.StatusFailed, h.r.Status)
		require.Equal(t, "failed", o.Ended[0].Status)
		require.Empty(t, o.Ended[0].Output)
		var body struct{ Message, Code string }
		require.NoError(t, json.Unmarshal(o.Ended[0].Error, &body))
		require.Equal(t, run.CodeOutputTooLarge, body.Code)
		require.Contains(t, body.Message, fmt.Sprintf("%d bytes", len(bigOutput(1001))))
		require.Contains(t, body.Message, "1000 bytes")
		require.Equal(t, run.BlockFailed, h.block("f").Status)
	})

	t.Run("AtTheBoundIsKept", func(t *testing.T) {
		t.Parallel()
		h := limitsHarness(t, failDef, run.Limits{AttemptOutput: 1000})
		o := h.succeed(1, h.start(), `{}`, at(0))
		out := bigOutput(1000 - len(`{"s":""}`))
		require.Len(t, out, 1000)
		o = h.succeed(1, *o.Start, out, at(10))
		require.Equal(t, "succeeded", o.Ended[0].Status)
		require.Equal(t, "after", o.Start.Block.ID)
	})

	t.Run("TriggerOutputIsTheBoundedInput", func(t *testing.T) {
		t.Parallel()
		h := limitsHarness(t, failDef, run.Limits{AttemptOutput: 1000})
		o := h.succeed(1, h.start(), bigOutput(5000), at(0))
		require.Equal(t, "succeeded", o.Ended[0].Status)
		require.Equal(t, "f", o.Start.Block.ID)
	})
}

func TestFinalFailuresAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, code := range []string{run.CodeInvalidParam, run.CodeOutputTooLarge, run.CodePrivateNetworkRefused} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, failDef, nil)
			st := *h.succeed(1, h.start(), `{}`, at(0)).Start
			o := h.apply(run.Failed{JobEvent: job(1), Block: st.Block.ID, AttemptID: st.ID, Message: "param /message: no", Code: code, Now: at(5)})
			require.Nil(t, o.Retry, "fail's policy allows 3 attempts, but this failure would repeat")
			require.Equal(t, run.StatusFailed, h.r.Status)
			require.JSONEq(t, `{"block_id":"f","message":"param /message: no"}`, string(o.Finish.Error))
		})
	}
	// Other codes keep the connector's policy.
	h := newHarness(t, failDef, nil)
	st := *h.succeed(1, h.start(), `{}`, at(0)).Start
	o := h.apply(run.Failed{JobEvent: job(1), Block: st.Block.ID, AttemptID: st.ID, Message: "slow", Code: run.CodeTimeout, Now: at(5)})
	require.NotNil(t, o.Retry)
}

func TestErrorMessagesAreCut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, failDef, nil)
	st := *h.succeed(1, h.start(), `{}`, at(0)).Start
	// A multi-byte character straddles the cut: it is cut before it, never in two.
	msg := strings.Repeat("a", run.MaxErrorMessage-1) + "é" + strings.Repeat("b", 100_000)
	o := h.fail(1, st, msg, at(5))
	var body struct{ Message string }
	require.NoError(t, json.Unmarshal(o.Ended[0].Error, &body))
	require.Less(t, len(body.Message), run.MaxErrorMessage+100)
	require.True(t, strings.HasPrefix(body.Message, strings.Repeat("a", run.MaxErrorMessage-1)+" … [error message cut at 4095 of its 104097 bytes]"), body.Message[len(body.Message)-80:])

	// The run's error says the same, cut as well.
	o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})
	o = h.fail(1, *o.Start, msg, at(500))
	o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})
	o = h.fail(1, *o.Start, msg, at(1000))
	require.Equal(t, run.StatusFailed, h.r.Status)
	require.Less(t, len(o.Finish.Error), run.MaxErrorMessage+200)
}

// sinksDef: t -> a, b (two transform sinks).
const sinksDef = `{"blocks":[
	{"block_id":"t","type":"trigger.manual","params":{}},
	{"block_id":"a","type":"transform","params":{"value":"A"}},
	{"block_id":"b","type":"transform","params":{"value":"B"}}
],"edges":[{"block_id":"t","target_block_id":"a"},{"block_id":"t","target_block_id":"b"}]}`

func TestRunOutputBound(t *testing.T) {
	t.Parallel()

	run2 := func(t *testing.T, l run.Limits, a, b int) (*harness, run.Outcome) {
		t.Helper()
		h := limitsHarness(t, sinksDef, l)
		o := h.succeed(1, h.start(), `{}`, at(0))
		require.Equal(t, "a", o.Start.Block.ID)
		o = h.succeed(1, *o.Start, bigOutput(a), at(1))
		require.Equal(t, "b", o.Start.Block.ID)
		return h, h.succeed(1, *o.Start, bigOutput(b), at(2))
	}

	t.Run("SinksOverTheBoundTogetherFailTheRun", func(t *testing.T) {
		t.Parallel()
		// Each sink fits the attempt bound; together they are over the run's.
		h, o := run2(t, run.Limits{AttemptOutput: 1000, RunOutput: 1500}, 900, 800)
		require.Equal(t, run.StatusFailed, h.r.Status)
		require.Equal(t, run.StatusFailed, o.Finish.Status)
		require.Empty(t, o.Finish.Output)
		var e struct{ BlockID, Message, Code string }
		require.NoError(t, json.Unmarshal(o.Finish.Error, &e))
		require.Equal(t, run.CodeOutputTooLarge, e.Code)
		require.Contains(t, e.Message, fmt.Sprintf("%d bytes", len(bigOutput(900))+len(bigOutput(800))))
		require.Contains(t, e.Message, "1500 bytes")
		require.Contains(t, string(o.Finish.Error), `"block_id":"a"`, "the largest sink")
		require.Equal(t, run.BlockSucceeded, h.block("b").Status)
	})

	t.Run("SinksWithinTheBoundComplete", func(t *testing.T) {
		t.Parallel()
		h, o := run2(t, run.Limits{AttemptOutput: 1000, RunOutput: 1716}, 900, 800)
		require.Equal(t, run.StatusCompleted, h.r.Status)
		require.NotEmpty(t, o.Finish.Output)
	})

	t.Run("RunBoundIsAtLeastTheAttemptBound", func(t *testing.T) {
		t.Parallel()
		h, _ := run2(t, run.Limits{AttemptOutput: 1000, RunOutput: 10}, 900, 10)
		require.Equal(t, run.StatusCompleted, h.r.Status)
	})
}
