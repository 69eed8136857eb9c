package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestOrchestratorCrash is issue 5's crash test: three run-orchestrator processes on one
// database, 20 runs of a chain of slow http.request steps, kill -9 of the replica that holds
// the most attempts in flight. Every run must complete; the killed replica's attempts are
// `lost` in the logs; no step's output is applied twice; the recovery time is logged.
func TestOrchestratorCrash(t *testing.T) {
	t.Parallel()
	const (
		runs     = 20
		stepTime = 1500 * time.Millisecond
	)
	steps := []string{"s1", "s2", "s3"}

	// The slow server counts each (run, block) it sees, then answers after stepTime.
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("run") + "/" + r.URL.Query().Get("block")
		mu.Lock()
		seen[key]++
		mu.Unlock()
		select {
		case <-time.After(stepTime):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"key":%q}`, key)
	}))
	t.Cleanup(slow.Close)

	orchestratorEnv := map[string]string{"SVC_HTTP_ALLOW_PRIVATE": "1"}
	sys := harness.Start(t, harness.Options{
		Env: map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin, "SVC_MAIL": "log"},
		ServiceEnv: map[harness.Service]map[string]string{
			harness.Orchestrator: orchestratorEnv,
			// The test polls and pages logs through the gateway faster than the default 60/min.
			harness.Gateway: {"SVC_RATE_LIMIT_PER_MINUTE": "100000"},
		},
	})
	// Two more replicas on the same database; the gateway keeps speaking to the first one,
	// so one of these two is the one killed.
	extra := []*harness.Process{
		sys.Run(t, harness.Orchestrator, map[string]string{"SVC_ORCHESTRATOR_ADDR": listenAddr(t)}),
		sys.Run(t, harness.Orchestrator, map[string]string{"SVC_ORCHESTRATOR_ADDR": listenAddr(t)}),
	}
	pool, err := pgxpool.New(context.Background(), sys.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := harness.Context(t)

	c := signUp(t, sys, "crash").c
	blocks := []any{map[string]any{"block_id": "start", "type": "trigger.manual", "params": map[string]any{}}}
	edges := []any{}
	prev := "start"
	for _, s := range steps {
		blocks = append(blocks, map[string]any{"block_id": s, "type": "http.request", "params": map[string]any{
			"method": "GET", "url": slow.URL + "/slow?run={{ run.id }}&block=" + s, "timeout_ms": 20000,
		}})
		edges = append(edges, map[string]any{"block_id": prev, "target_block_id": s})
		prev = s
	}
	r := c.post("/api/workflows", map[string]any{"name": "crash", "definition": map[string]any{"blocks": blocks, "edges": edges}})
	require.Equal(t, http.StatusCreated, r.Status, r.Raw)
	require.Empty(t, r.Body["validation_errors"], r.Raw)
	wf, _ := r.Body["id"].(string)

	ids := make([]string, runs)
	for i := range ids {
		r := c.post("/api/workflows/"+wf+"/run", map[string]any{"input": map[string]any{"i": i}})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		ids[i], _ = r.Body["runId"].(string)
	}

	// Wait until every run has a step in flight, then kill the extra replica holding most.
	type inflight struct{ id, run, block string }
	var victim *harness.Process
	var killedAttempts []inflight
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.step_attempts
			WHERE status = 'running' AND run_id = ANY($1) AND block_id <> 'start'`, ids).Scan(&n))
		return n == runs
	}, 30*time.Second, 10*time.Millisecond, "not every run got a step in flight")
	best := 0
	for _, p := range extra {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.step_attempts a
			JOIN orchestrator.replicas r ON r.id = a.replica WHERE a.status = 'running' AND r.pid = $1`, p.Pid()).Scan(&n))
		if n > best || victim == nil {
			best, victim = n, p
		}
	}
	require.Positive(t, best, "neither extra replica holds an attempt; nothing to kill")
	var victimID string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM orchestrator.replicas WHERE pid = $1`, victim.Pid()).Scan(&victimID))
	victim.Kill(t)
	killedAt := time.Now()
	rows, err := pool.Query(ctx, `SELECT id, run_id, block_id FROM orchestrator.step_attempts
		WHERE status = 'running' AND replica = $1`, victimID)
	require.NoError(t, err)
	for rows.Next() {
		var a inflight
		require.NoError(t, rows.Scan(&a.id, &a.run, &a.block))
		killedAttempts = append(killedAttempts, a)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, killedAttempts)
	t.Logf("killed replica %s (pid %d) with %d attempts in flight", victimID, victim.Pid(), len(killedAttempts))

	// Every run completes (polled in the database, then read once through the gateway).
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done, bad int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'completed'),
			count(*) FILTER (WHERE status IN ('failed', 'cancelled')) FROM orchestrator.runs WHERE id = ANY($1)`, ids).Scan(&done, &bad))
		require.Zero(t, bad, "a run failed or was cancelled")
		if done == runs {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d runs completed within 60 s of the kill", done, runs)
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range ids {
		r := c.get("/api/runs/" + id)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, "completed", r.Body["status"], r.Raw)
	}

	// The killed attempts are lost in the logs (read through the gateway).
	for _, a := range killedAttempts {
		var found map[string]any
		cursor := ""
		for {
			path := "/api/runs/" + a.run + "/logs?limit=50"
			if cursor != "" {
				path += "&after=" + cursor
			}
			r := c.get(path)
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			items := arr(t, r.Body["items"])
			for _, it := range items {
				if l := obj(t, it); l["id"] == a.id {
					found = l
				}
			}
			cursor, _ = r.Body["nextCursor"].(string)
			if len(items) == 0 {
				break
			}
		}
		require.NotNil(t, found, "attempt %s missing from the logs", a.id)
		require.Equal(t, "lost", found["status"], found)
		require.Equal(t, "lost", obj(t, found["error"])["code"], found)
		require.Equal(t, "replica "+victimID+" stopped heartbeating", obj(t, found["error"])["message"], found)
	}

	// No step's output applied twice: one succeeded attempt per (run, block), and the slow
	// server saw each (run, block) at most twice (once lost, once succeeded).
	rows, err = pool.Query(ctx, `SELECT run_id, block_id, count(*) FILTER (WHERE status = 'succeeded'),
			count(*) FILTER (WHERE status = 'lost'), count(*)
		FROM orchestrator.step_attempts WHERE run_id = ANY($1) GROUP BY run_id, block_id`, ids)
	require.NoError(t, err)
	pairs, lostTotal := 0, 0
	for rows.Next() {
		var run, block string
		var succeeded, lost, all int
		require.NoError(t, rows.Scan(&run, &block, &succeeded, &lost, &all))
		require.Equal(t, 1, succeeded, "%s/%s succeeded %d times", run, block, succeeded)
		require.Equal(t, all, succeeded+lost, "%s/%s has attempts that neither succeeded nor were lost", run, block)
		pairs++
		lostTotal += lost
	}
	require.NoError(t, rows.Err())
	require.Equal(t, runs*(len(steps)+1), pairs)
	require.Equal(t, len(killedAttempts), lostTotal, "only the killed replica's attempts are lost")
	mu.Lock()
	for key, n := range seen {
		require.LessOrEqual(t, n, 2, "the slow server saw %s %d times", key, n)
	}
	require.Len(t, seen, runs*len(steps))
	mu.Unlock()

	// Recovery: kill → the last lost attempt's block succeeded on another replica.
	var lastLost, lastRecovered, lastRestart time.Time
	var recoveries []time.Duration
	for _, a := range killedAttempts {
		var lostAt, restartedAt, doneAt time.Time
		var replica string
		require.NoError(t, pool.QueryRow(ctx, `SELECT l.finished_at, s.started_at, s.finished_at, s.replica
			FROM orchestrator.step_attempts l JOIN orchestrator.step_attempts s
			  ON s.run_id = l.run_id AND s.block_id = l.block_id AND s.status = 'succeeded'
			WHERE l.id = $1`, a.id).Scan(&lostAt, &restartedAt, &doneAt, &replica))
		require.NotEqual(t, victimID, replica)
		recoveries = append(recoveries, doneAt.Sub(killedAt))
		if lostAt.After(lastLost) {
			lastLost = lostAt
		}
		if restartedAt.After(lastRestart) {
			lastRestart = restartedAt
		}
		if doneAt.After(lastRecovered) {
			lastRecovered = doneAt
		}
	}
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	t.Logf("recovery after kill -9 of 1 of 3 replicas (%d runs, %d attempts lost, steps of %s): last attempt marked lost after %s, "+
		"last lost block restarted after %s, last lost block succeeded elsewhere after %s (fastest %s)",
		runs, len(killedAttempts), stepTime, lastLost.Sub(killedAt).Round(time.Millisecond), lastRestart.Sub(killedAt).Round(time.Millisecond),
		lastRecovered.Sub(killedAt).Round(time.Millisecond), recoveries[0].Round(time.Millisecond))
	// Dead after 5 s, a sweep every second, then one step of stepTime: well under 15 s.
	require.Less(t, lastRecovered.Sub(killedAt), 15*time.Second)
}
