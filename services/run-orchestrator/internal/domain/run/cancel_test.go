package run_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Cancel, and a failure stopping the other branches.

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
