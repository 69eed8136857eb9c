package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func TestEventIDsResumeExactly(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A run's rows at its end: a retry (flaky 1 failed at 3, retried at 4), a wait.
	all := []run.AttemptChange{
		{ID: "a1", BlockID: "start", Status: "succeeded", StartedSeq: 1, Seq: 2, StartedAt: at},
		{ID: "a2", BlockID: "flaky", Status: "failed", StartedSeq: 3, Seq: 4, RetryAt: at.Add(time.Second)},
		{ID: "a3", BlockID: "flaky", Status: "succeeded", StartedSeq: 5, Seq: 7},
		{ID: "a4", BlockID: "side", Status: "succeeded", StartedSeq: 6, Seq: 8}, // parallel: interleaved
	}
	snap := func(after int64, status run.Status, changeSeq int64, rows ...run.AttemptChange) run.Snapshot {
		s := run.Snapshot{Run: run.Record{ID: "run_1", Status: status}, ChangeSeq: changeSeq}
		for _, a := range rows {
			if a.Seq > after {
				s.Attempts = append(s.Attempts, a)
			}
		}
		return s
	}
	kinds := func(evs []app.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID+" "+e.Kind+" "+e.Try.ID+string(e.Status))
		}
		return out
	}
	whole, end := app.Events(snap(0, run.StatusCompleted, 8, all...), app.Cursor{})
	require.Equal(t, []string{
		"1.0 attempt.started a1", "2.0 attempt.finished a1", "3.0 attempt.started a2", "4.0 attempt.finished a2",
		"5.0 attempt.started a3", "6.0 attempt.started a4", "7.0 attempt.finished a3", "8.0 attempt.finished a4",
		"8.4 run.status completed",
	}, kinds(whole))
	require.True(t, end.Final())
	require.Equal(t, time.Time{}, whole[2].Try.RetryAt, "a started event says nothing of its end")
	require.Equal(t, at.Add(time.Second), whole[3].Try.RetryAt)

	// Resuming after any event gives exactly the events after it.
	for i, e := range whole {
		c, err := app.ParseCursor(e.ID)
		require.NoError(t, err)
		rest, _ := app.Events(snap(c.Seq, run.StatusCompleted, 8, all...), c)
		require.Equal(t, kinds(whole[i+1:]), kinds(rest), "after %s", e.ID)
	}

	// Live: a3 running while a status changes at its sequence; then it ends.
	live := []run.AttemptChange{all[0], all[1], {ID: "a3", BlockID: "flaky", Status: "running", StartedSeq: 5, Seq: 5}}
	first, c := app.Events(snap(0, run.StatusRunning, 5, live...), app.Cursor{})
	require.Equal(t, "5.2 run.status running", kinds(first)[len(first)-1])
	waiting, c := app.Events(snap(c.Seq, run.StatusWaiting, 5, live...), c)
	require.Equal(t, []string{"5.3 run.status waiting"}, kinds(waiting), "a status at the same sequence gets its own id")
	none, _ := app.Events(snap(c.Seq, run.StatusWaiting, 5, live...), c)
	require.Empty(t, none, "nothing new, nothing sent")

	for _, bad := range []string{"x", "1", "1.7", "-1.0", "1.-1", ".", "1.2.3"} {
		_, err := app.ParseCursor(bad)
		require.ErrorIs(t, err, app.ErrBadEventID, bad)
	}
}
