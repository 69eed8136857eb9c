package query_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app/query"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func TestEventIDsResumeExactly(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A run's rows at its end: a retry (flaky a2 failed at 5, retried as a3), a parallel side
	// step interleaved with it, a signal wait w, then a last step.
	all := []run.AttemptChange{
		{ID: "a1", BlockID: "start", Status: "succeeded", StartedSeq: 1, Seq: 3, StartedAt: at},
		{ID: "a2", BlockID: "flaky", Status: "failed", StartedSeq: 4, Seq: 5, RetryAt: at.Add(time.Second)},
		{ID: "a3", BlockID: "flaky", Status: "succeeded", StartedSeq: 6, Seq: 8},
		{ID: "a4", BlockID: "side", Status: "succeeded", StartedSeq: 7, Seq: 9},
		{ID: "w", BlockID: "w", Status: "succeeded", StartedSeq: 10, Seq: 12},
		{ID: "a5", BlockID: "last", Status: "succeeded", StartedSeq: 14, Seq: 15},
	}
	wait := &run.Waiting{BlockID: "w", Kind: "signal", Signal: "go", Until: at.Add(time.Hour)}
	log := []run.StatusChange{
		{Seq: 2, Status: run.StatusRunning}, {Seq: 11, Status: run.StatusWaiting, Waiting: wait},
		{Seq: 13, Status: run.StatusRunning}, {Seq: 16, Status: run.StatusCompleted},
	}
	snap := func(after int64, status run.Status, changeSeq int64, rows []run.AttemptChange, statuses []run.StatusChange) run.Snapshot {
		s := run.Snapshot{Run: run.Record{ID: "run_1", Status: status, Error: []byte(`{"x":1}`)}, ChangeSeq: changeSeq}
		for _, a := range rows {
			if a.Seq > after {
				s.Attempts = append(s.Attempts, a)
			}
		}
		for _, st := range statuses {
			if st.Seq >= after {
				s.Statuses = append(s.Statuses, st)
			}
		}
		return s
	}
	kinds := func(evs []query.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID+" "+e.Kind+" "+e.Try.ID+string(e.Status))
		}
		return out
	}
	whole, end := query.Events(snap(0, run.StatusCompleted, 16, all, log), query.Cursor{})
	require.Equal(t, []string{
		"0.1 run.status queued", "1.1 attempt.started a1", "2.2 run.status running", "3.2 attempt.finished a1",
		"4.2 attempt.started a2", "5.2 attempt.finished a2", "6.2 attempt.started a3", "7.2 attempt.started a4",
		"8.2 attempt.finished a3", "9.2 attempt.finished a4", "10.2 attempt.started w", "11.3 run.status waiting",
		"12.3 attempt.finished w", "13.2 run.status running", "14.2 attempt.started a5", "15.2 attempt.finished a5",
		"16.4 run.status completed",
	}, kinds(whole))
	require.True(t, end.Final())
	require.Equal(t, time.Time{}, whole[4].Try.RetryAt, "a started event says nothing of its end")
	require.Equal(t, at.Add(time.Second), whole[5].Try.RetryAt)
	require.Equal(t, wait, whole[11].Run.Waiting, "a waiting status says what it waited for then")
	require.Nil(t, whole[13].Run.Waiting)
	require.Nil(t, whole[13].Run.Error, "a status on the way carries none of the finish")
	require.JSONEq(t, `{"x":1}`, string(whole[16].Run.Error))

	// Resuming after any event gives exactly the events after it, statuses on the way included.
	for i, e := range whole {
		c, err := query.ParseCursor(e.ID)
		require.NoError(t, err)
		rest, _ := query.Events(snap(c.Seq, run.StatusCompleted, 16, all, log), c)
		require.Equal(t, kinds(whole[i+1:]), kinds(rest), "after %s", e.ID)
	}

	// Live: read while the run waits, then again once it went on.
	waitingRows := append(slices.Clone(all[:4]), run.AttemptChange{ID: "w", BlockID: "w", Status: "running", StartedSeq: 10, Seq: 10})
	first, c := query.Events(snap(0, run.StatusWaiting, 11, waitingRows, log[:2]), query.Cursor{})
	require.Equal(t, []string{"10.2 attempt.started w", "11.3 run.status waiting"}, kinds(first)[len(first)-2:])
	none, c := query.Events(snap(c.Seq, run.StatusWaiting, 11, waitingRows, log[:2]), c)
	require.Empty(t, none, "nothing new, nothing sent")
	laterRows := append(slices.Clone(all[:5]), run.AttemptChange{ID: "a5", BlockID: "last", Status: "running", StartedSeq: 14, Seq: 14})
	later, _ := query.Events(snap(c.Seq, run.StatusRunning, 14, laterRows, log[:3]), c)
	require.Equal(t, []string{"12.3 attempt.finished w", "13.2 run.status running", "14.2 attempt.started a5"}, kinds(later))

	// A run migrated in flight: its one logged status shares its last attempt's sequence, and
	// comes after it, also to a client that had that attempt's event.
	migrated := []run.AttemptChange{{ID: "a1", BlockID: "start", Status: "running", StartedSeq: 0, Seq: 1}}
	mlog := []run.StatusChange{{Seq: 1, Status: run.StatusRunning}}
	m, _ := query.Events(snap(0, run.StatusRunning, 1, migrated, mlog), query.Cursor{})
	require.Equal(t, []string{"0.1 run.status queued", "1.1 attempt.started a1", "1.2 run.status running"}, kinds(m))
	c, _ = query.ParseCursor("1.1")
	m, _ = query.Events(snap(1, run.StatusRunning, 1, migrated, mlog), c)
	require.Equal(t, []string{"1.2 run.status running"}, kinds(m))

	// A status missing from the log (none should be) is still sent, last.
	fallback, _ := query.Events(snap(0, run.StatusCancelled, 0, nil, nil), query.Cursor{})
	require.Equal(t, []string{"0.1 run.status queued", "0.6 run.status cancelled"}, kinds(fallback))

	for _, bad := range []string{"x", "1", "1.7", "-1.0", "1.-1", ".", "1.2.3"} {
		_, err := query.ParseCursor(bad)
		require.ErrorIs(t, err, query.ErrBadEventID, bad)
	}
}

// TestEventsSayWhenEachStatusWasTaken (issue 22): a stream read after the fact (a client that
// opens it on a run under way, or reconnects) gets the events at once; each status says when
// the run took it, the queued one when the run was created, so that the events' times are in
// the order of the events.
func TestEventsSayWhenEachStatusWasTaken(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	snap := run.Snapshot{
		Run: run.Record{ID: "run_1", Status: run.StatusCompleted, CreatedAt: ms(0), FinishedAt: ms(90)},
		Attempts: []run.AttemptChange{
			{ID: "a1", BlockID: "start", Status: "succeeded", StartedSeq: 1, Seq: 3, StartedAt: ms(5), FinishedAt: ms(5)},
			{ID: "w", BlockID: "w", Status: "succeeded", StartedSeq: 4, Seq: 6, StartedAt: ms(10), FinishedAt: ms(60)},
			{ID: "a2", BlockID: "last", Status: "succeeded", StartedSeq: 8, Seq: 9, StartedAt: ms(61), FinishedAt: ms(90)},
		},
		Statuses: []run.StatusChange{
			{Seq: 2, Status: run.StatusRunning, At: ms(5)},
			{Seq: 5, Status: run.StatusWaiting, At: ms(10), Waiting: &run.Waiting{BlockID: "w", Kind: "signal", Signal: "go"}},
			{Seq: 7, Status: run.StatusRunning, At: ms(60)},
			{Seq: 10, Status: run.StatusCompleted, At: ms(90)},
		},
		ChangeSeq: 10,
	}
	evs, _ := query.Events(snap, query.Cursor{})
	var statuses []time.Time
	last := time.Time{}
	for _, e := range evs {
		when := e.At
		switch e.Kind {
		case query.EventStatus:
			require.False(t, e.At.IsZero(), "%s %s says when", e.ID, e.Status)
			statuses = append(statuses, e.At)
		case query.EventAttemptStarted:
			when = e.Try.StartedAt
		case query.EventAttemptFinished:
			when = e.Try.FinishedAt
		}
		require.False(t, when.Before(last), "%s %s at %s comes after an event at %s", e.ID, e.Kind, when, last)
		last = when
	}
	require.Equal(t, []time.Time{ms(0), ms(5), ms(10), ms(60), ms(90)}, statuses)
}
