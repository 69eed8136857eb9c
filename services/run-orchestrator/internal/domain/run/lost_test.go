package run_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Runs handed back by a stopping replica, attempts lost with a dead replica, and blocks a
// job's later try takes back.

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
