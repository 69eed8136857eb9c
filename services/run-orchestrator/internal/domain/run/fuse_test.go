package run_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// TestOutcomeThen: the outcomes of a run's events applied one after the other in one
// transaction, joined with Then, say what the separate outcomes say in order: every row and
// change, and the last run-wide decisions.
func TestOutcomeThen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, linearDef, map[string]any{"name": "ada"})
	first := h.apply(run.Advance{JobEvent: job(1), Now: t0})
	require.True(t, first.Fusable())
	second := h.succeed(1, *first.Start, `{"name":"ada"}`, at(1))
	require.True(t, second.Fusable())
	third := h.succeed(1, *second.Start, `{"message":"hello ada"}`, at(2))
	require.False(t, third.Fusable(), "the run is over: nothing to start")

	fused := first
	fused.Then(second)
	fused.Then(third)
	require.Nil(t, fused.Start)
	require.True(t, fused.CompleteJob)
	require.Equal(t, third.Finish, fused.Finish)
	require.Equal(t, append(append(append([]run.StartAttempt{}, first.Begun...), second.Begun...), third.Begun...), fused.Begun)
	require.Equal(t, append(append([]run.EndedAttempt{}, second.Ended...), third.Ended...), fused.Ended)
	require.Equal(t, []string{"t", "a"}, fused.Changed, "each block once, in the order it first changed")
	require.Equal(t, []string{
		"attempt.started:t:running", "run.status:running", "attempt.finished:t:succeeded", "attempt.started:a:running",
		"attempt.finished:a:succeeded", "run.status:completed",
	}, kinds(fused.Changes))
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, seqs(fused.Changes), "sequences stay in order across the joined events")
	require.True(t, fused.ReleaseAll)

	// An outcome that consumed a signal or schedules a retry ends a joined commit.
	require.False(t, (&run.Outcome{Start: first.Start, Consume: &run.Consume{SignalID: "sig_1"}}).Fusable())
	require.False(t, (&run.Outcome{Start: first.Start, Retry: &run.Retry{Block: "a"}}).Fusable())

	// Jobs add up; the later job time and decisions win.
	a := run.Outcome{NewJobs: 1, CompleteJob: true, CancelJobs: true, Delivered: true}
	a.Then(run.Outcome{NewJobs: 2, JobsAt: at(5), Consume: &run.Consume{SignalID: "sig_2"}})
	require.Equal(t, run.Outcome{NewJobs: 3, JobsAt: at(5), CancelJobs: true, Delivered: true, Consume: &run.Consume{SignalID: "sig_2"}},
		stripChanged(a))
}

// stripChanged drops the unexported bookkeeping Then leaves, for comparing outcomes.
func stripChanged(o run.Outcome) run.Outcome {
	return run.Outcome{Start: o.Start, Begun: o.Begun, Ended: o.Ended, Armed: o.Armed, Released: o.Released, ReleaseAll: o.ReleaseAll,
		Retry: o.Retry, Consume: o.Consume, NewJobs: o.NewJobs, JobsAt: o.JobsAt, CancelJobs: o.CancelJobs, CompleteJob: o.CompleteJob,
		Finish: o.Finish, Delivered: o.Delivered, Changed: o.Changed, Changes: o.Changes}
}
