package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/service"
)

// These tests show crash recovery without killing a process: the replica's heartbeat is set
// to an hour (it never refreshes) and its row is backdated in the database, so its sweeper
// takes it for a dead replica. The replica keeps running, which is the harder case: its
// in-flight connector call is a zombie whose result must be dropped (fencing).

// deadReplicaConfig never refreshes the heartbeat and sweeps often.
func deadReplicaConfig(c *service.Config) {
	c.Heartbeat = time.Hour
	c.DeadAfter = 5 * time.Second
	c.SweepEvery = 20 * time.Millisecond
	c.AllowPrivateNetwork = true
}

func db(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func setHeartbeat(t *testing.T, pool *pgxpool.Pool, replica, age string) {
	t.Helper()
	tag, err := pool.Exec(t.Context(), `UPDATE orchestrator.replicas SET heartbeat_at = now() - $2::interval WHERE id = $1`, replica, age)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the replica registered itself")
}

func blockLogs(logs []map[string]any, block string) []map[string]any {
	var out []map[string]any
	for _, l := range logs {
		if l["block_id"] == block {
			out = append(out, l)
		}
	}
	return out
}

func slowWorkflow(url string) string {
	return def([]string{manual,
		`{"block_id":"slow","type":"http.request","params":{"method":"GET","url":"` + url + `"}}`,
		`{"block_id":"after","type":"log","params":{"message":"after {{ steps.slow.output.status }}"}}`,
	}, edge("start", "slow"), edge("slow", "after"))
}

func TestDeadReplicaAttemptIsLostAndRunContinues(t *testing.T) {
	t.Parallel()
	// The first call blocks until release; later calls answer at once.
	release := make(chan struct{})
	var calls, finished atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			defer finished.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(slow.Close)
	sys := startWith(t, deadReplicaConfig)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the app stops (cleanups run last-in first-out)
	pool := db(t, sys.dbURL)
	b := sys.setup(t)
	b.workflow(t, "wf_slow", 1, slowWorkflow(slow.URL))

	id := b.startRun(t, "wf_slow", nil)
	require.Eventually(t, func() bool { return calls.Load() >= 1 }, 10*time.Second, 5*time.Millisecond, "the slow step never started")
	setHeartbeat(t, pool, sys.app.Replica(), "1 minute")
	// The sweeper marks the attempt lost; then the replica is alive again and runs the block.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.step_attempts WHERE run_id = $1 AND status = 'lost'`, id).Scan(&n))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "the dead replica's attempt was never marked lost")
	setHeartbeat(t, pool, sys.app.Replica(), "0 seconds")
	got := b.waitStatus(t, id, "completed")
	require.Equal(t, map[string]any{"after": map[string]any{"message": "after 200"}}, got["output"])

	logs := b.logs(t, id)
	slowLogs := blockLogs(logs, "slow")
	require.GreaterOrEqual(t, len(slowLogs), 2)
	for i, l := range slowLogs {
		require.EqualValues(t, i+1, l["attempt"])
		if i < len(slowLogs)-1 {
			// Sweeps may catch a second attempt before the heartbeat is back: all lost.
			require.Equal(t, "lost", l["status"], l)
			e := l["error"].(map[string]any)
			require.Equal(t, "lost", e["code"])
			require.Equal(t, "replica "+sys.app.Replica()+" stopped heartbeating", e["message"])
			require.NotEmpty(t, l["finishedAt"])
		}
	}
	require.Equal(t, "succeeded", slowLogs[len(slowLogs)-1]["status"])
	require.Len(t, blockLogs(logs, "after"), 1)

	// The zombie call now returns: its result is fenced off and changes nothing.
	unblock()
	require.Eventually(t, func() bool { return finished.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	// Watch the run's change sequence for a while: a late result would move it.
	var seq0 int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT change_seq FROM orchestrator.runs WHERE id = $1`, id).Scan(&seq0))
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		var seq int64
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT change_seq FROM orchestrator.runs WHERE id = $1`, id).Scan(&seq))
		require.Equal(t, seq0, seq, "a lost attempt's late result was applied")
	}
	require.Len(t, b.logs(t, id), len(logs))
	var succeeded int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'slow' AND status = 'succeeded'`, id).Scan(&succeeded))
	require.Equal(t, 1, succeeded)
	// No River job of the run is left running.
	var running int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.river_job WHERE args->>'run_id' = $1 AND state = 'running'`, id).Scan(&running))
	require.Zero(t, running)
}

func TestCrashLoopStopsAfterTenAttempts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	sys := startWith(t, deadReplicaConfig)
	t.Cleanup(func() { close(release) })
	pool := db(t, sys.dbURL)
	b := sys.setup(t)
	b.workflow(t, "wf_loop", 1, slowWorkflow(slow.URL))

	id := b.startRun(t, "wf_loop", nil)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'slow'`, id).Scan(&n))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond)
	// From now on every attempt of the block is lost: the replica stays dead.
	setHeartbeat(t, pool, sys.app.Replica(), "1 minute")
	var got map[string]any
	require.Eventually(t, func() bool {
		got = b.do(t, "GET", "/api/runs/"+id, nil).Body
		return got["status"] == "failed"
	}, 30*time.Second, 10*time.Millisecond, "the crash loop never ended")
	errBody := got["error"].(map[string]any)
	require.Equal(t, "slow", errBody["block_id"])
	require.True(t, strings.HasPrefix(errBody["message"].(string), "step stopped after 10 attempts"), errBody)

	slowLogs := blockLogs(b.logs(t, id), "slow")
	// Ten attempts although http.request's max_attempts is 3: lost attempts do not count.
	require.Len(t, slowLogs, 10)
	for i, l := range slowLogs {
		require.EqualValues(t, i+1, l["attempt"])
		require.Equal(t, "lost", l["status"])
	}
	require.Empty(t, blockLogs(b.logs(t, id), "after"))
}

// TestFinishedRunsJobOfADeadReplicaIsFinalized: a job done with its run is completed by River's
// completer after its worker returns, not in the run's last transaction. A replica that dies
// in between leaves the job running with the run finished; the sweep finalizes it, and the run
// is left as it was (no attempt, status or output changes).
func TestFinishedRunsJobOfADeadReplicaIsFinalized(t *testing.T) {
	t.Parallel()
	sys := startWith(t, func(c *service.Config) { c.SweepEvery = 20 * time.Millisecond })
	pool := db(t, sys.dbURL)
	b := sys.setup(t)
	// Longer than a run ends at its dispatch: a job runs it.
	b.workflow(t, "wf_chain", 1, chainDef(21))
	id := b.startRun(t, "wf_chain", nil)
	done := b.waitStatus(t, id, "completed")
	var job int64
	require.Eventually(t, func() bool {
		err := pool.QueryRow(t.Context(), `SELECT id FROM orchestrator.river_job WHERE args->>'run_id' = $1 AND state = 'completed'`, id).Scan(&job)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "River's completer never completed the job")
	var seq0 int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT change_seq FROM orchestrator.runs WHERE id = $1`, id).Scan(&seq0))
	logs0 := b.logs(t, id)

	// As if the completion never happened: the job is running, last fetched by a replica
	// that no longer heartbeats.
	_, err := pool.Exec(t.Context(), `UPDATE orchestrator.river_job SET state = 'running', finalized_at = NULL,
		attempted_by = array_append(attempted_by, 'rep_gone@host/1') WHERE id = $1`, job)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT state::text FROM orchestrator.river_job WHERE id = $1`, job).Scan(&state))
		return state != "running"
	}, 10*time.Second, 10*time.Millisecond, "the sweep never finalized the dead replica's job")
	// Whatever the sweep queued to look at the run again finds it finished.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.river_job WHERE args->>'run_id' = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, id).Scan(&n))
		return n == 0
	}, 10*time.Second, 10*time.Millisecond, "a job of the finished run is left unfinished")
	got := b.do(t, "GET", "/api/runs/"+id, nil).Body
	require.Equal(t, "completed", got["status"])
	require.Equal(t, done["output"], got["output"])
	var seq int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT change_seq FROM orchestrator.runs WHERE id = $1`, id).Scan(&seq))
	require.Equal(t, seq0, seq, "the finished run changed")
	require.Len(t, b.logs(t, id), len(logs0))
}
