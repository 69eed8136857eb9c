package service_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/adapters/runevents"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Issue 13, one source of run events: every committed change of a run — from its jobs, its
// timers and the signal API alike — reaches the feed once, after the commit, in the order of
// the run's change sequence, and says what the logs and the run say.
func TestRunChangesReachTheFeedInOrder(t *testing.T) {
	t.Parallel()
	sys := start(t)
	pool := db(t, sys.dbURL)
	b := sys.setup(t)
	b.workflow(t, "wf_events", 1, def([]string{manual,
		`{"block_id":"flaky","type":"fail","params":{"message":"first try fails","fail_attempts":1}}`,
		`{"block_id":"nap","type":"wait","params":{"duration":"200ms"}}`,
		`{"block_id":"hold","type":"wait","params":{"signal":"go","timeout":"1h"}}`,
		`{"block_id":"after","type":"log","params":{"message":"done"}}`,
	}, edge("start", "flaky"), edge("flaky", "nap"), edge("nap", "hold"), edge("hold", "after")))

	sub := sys.app.Events().Subscribe(runevents.Filter{OrganizationID: b.org}, 1000)
	t.Cleanup(sub.Close)
	id := b.startRun(t, "wf_events", map[string]any{"input": map[string]any{"n": 1}})
	require.Eventually(t, func() bool {
		r := b.do(t, "GET", "/api/runs/"+id, nil)
		w, _ := r.Body["waiting"].(map[string]any)
		return w != nil && w["kind"] == "signal"
	}, 10*time.Second, 10*time.Millisecond)
	r := b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go", "payload": map[string]any{"ok": true}})
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	b.waitStatus(t, id, "completed")

	var changes []run.Change
	deadline := time.After(10 * time.Second)
	for len(changes) == 0 || changes[len(changes)-1].Kind != run.ChangeStatus || changes[len(changes)-1].Status != run.StatusCompleted {
		select {
		case c, ok := <-sub.Changes():
			require.True(t, ok, "the subscription never lags here")
			require.Equal(t, id, c.RunID)
			require.Equal(t, b.org, c.OrganizationID)
			changes = append(changes, c)
		case <-deadline:
			t.Fatalf("the run's final change never came; got %v", changes)
		}
	}

	// The story, in order: statuses, the retry, both waits armed and released.
	var story []string
	for _, c := range changes {
		switch c.Kind {
		case run.ChangeStatus:
			story = append(story, "status "+string(c.Status))
		case run.ChangeRetryScheduled, run.ChangeWaitArmed, run.ChangeWaitReleased:
			story = append(story, c.Kind+" "+c.BlockID)
		}
	}
	require.Equal(t, []string{
		"status running", "retry.scheduled flaky",
		"wait.armed nap", "status waiting", "wait.released nap", "status running",
		"wait.armed hold", "status waiting", "wait.released hold", "status running",
		"status completed",
	}, story)

	// Attempt changes: sequences strictly increase, and each attempt's last change is its row.
	last := map[string]run.Change{}
	var seq int64
	for _, c := range changes {
		require.GreaterOrEqual(t, c.Seq, seq, "changes come in the run's change order")
		if c.Kind == run.ChangeAttemptStarted || c.Kind == run.ChangeAttemptFinished {
			require.Greater(t, c.Seq, seq, "an attempt change takes a sequence of its own")
			last[c.AttemptID] = c
		}
		seq = c.Seq
	}
	rows, err := pool.Query(context.Background(), `SELECT id, status, seq FROM orchestrator.step_attempts WHERE run_id = $1`, id)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var aid, status string
		var s int64
		require.NoError(t, rows.Scan(&aid, &status, &s))
		require.Equal(t, status, last[aid].AttemptStatus, aid)
		require.Equal(t, s, last[aid].Seq, aid)
		n++
	}
	require.NoError(t, rows.Err())
	require.Len(t, last, n, "every attempt, and no other, is in the feed")
	require.Equal(t, 6, n, "start, flaky twice, nap, hold, after")
	var changeSeq int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT change_seq FROM orchestrator.runs WHERE id = $1`, id).Scan(&changeSeq))
	require.Equal(t, changeSeq, changes[len(changes)-1].Seq)
}
