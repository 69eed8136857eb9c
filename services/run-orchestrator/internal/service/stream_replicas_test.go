package service_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/adapters/postgres"
	"svc.dev/services/run-orchestrator/internal/adapters/runnotify"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/service"
)

// replicaPair starts replica a, which executes runs, and replica b on a's database, which
// executes none (its workers and timers stopped) and serves the streams; mod adjusts b's
// configuration. The two bundles are one organization seen through either replica.
func replicaPair(t *testing.T, mod func(*service.Config)) (onA, onB *testBundle) {
	t.Helper()
	a := startWith(t, allowPrivate)
	b := startWith(t, func(c *service.Config) {
		sameDatabase(a)(c)
		if mod != nil {
			mod(c)
		}
	})
	require.NoError(t, b.app.StopWorking(t.Context()))
	onA = a.setup(t)
	return onA, &testBundle{sys: b, org: onA.org}
}

// orgStatuses reads the organization stream's statuses of run id until want (failing after
// 15 s without an event); events of other runs are ignored.
func orgStatuses(t *testing.T, events <-chan sseEvent, id, want string, got *[]string) {
	t.Helper()
	for {
		e, ok := next(t, events)
		require.True(t, ok, "the organization's stream ended: %v", *got)
		if e.Data["runId"] != id {
			continue
		}
		*got = append(*got, e.Data["status"].(string))
		if e.Data["status"] == want {
			return
		}
	}
}

// requireStatusPath checks an organization stream's statuses of one run: a subsequence of the
// run's statuses (a status passed between two reads may be missing), never one twice in a row.
func requireStatusPath(t *testing.T, path, got []string) {
	t.Helper()
	i := 0
	for k, s := range got {
		if k > 0 {
			require.NotEqual(t, got[k-1], s, "a status sent twice: %v", got)
		}
		for i < len(path) && path[i] != s {
			i++
		}
		require.Less(t, i, len(path), "statuses out of the run's order: %v, want a subsequence of %v", got, path)
		i++
	}
}

// requireExecutedBy checks that every attempt of the run was made by the replica.
func requireExecutedBy(t *testing.T, b *testBundle, id, replica string) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), b.sys.dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var others, all int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE replica <> $2), count(*)
		FROM orchestrator.step_attempts WHERE run_id = $1`, id, replica).Scan(&others, &all))
	require.Positive(t, all)
	require.Zero(t, others, "attempts made by another replica")
}

// TestStreamsOnAnotherReplica: a run executed by replica A, its stream and the organization's
// stream served by replica B (woken by A's notifications): B's run stream says every event of
// the run in order and ends; B's organization stream follows the run to its end.
func TestStreamsOnAnotherReplica(t *testing.T) {
	t.Parallel()
	onA, onB := replicaPair(t, nil)
	onA.workflow(t, "wf_rep", 1, def([]string{manual,
		`{"block_id":"flaky","type":"fail","params":{"message":"first try fails","fail_attempts":1}}`,
		`{"block_id":"nap","type":"wait","params":{"duration":"200ms"}}`,
		`{"block_id":"after","type":"log","params":{"message":"done"}}`,
	}, edge("start", "flaky"), edge("flaky", "nap"), edge("nap", "after")))
	status, org := onB.openStream(t, t.Context(), "/api/runs/events?workflowId=wf_rep", "")
	require.Equal(t, http.StatusOK, status)
	id := onA.startRun(t, "wf_rep", nil)
	status, events := onB.openStream(t, t.Context(), "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, status)
	var lines []string
	for e, ok := next(t, events); ok; e, ok = next(t, events) {
		lines = append(lines, story(e))
	}
	require.Equal(t, []string{
		"status queued", "attempt.started start", "status running", "attempt.finished start succeeded",
		"attempt.started flaky", "attempt.finished flaky failed retry",
		"attempt.started flaky", "attempt.finished flaky succeeded",
		"attempt.started nap", "status waiting sleep", "attempt.finished nap succeeded", "status running",
		"attempt.started after", "attempt.finished after succeeded", "status completed",
	}, lines)
	var statuses []string
	orgStatuses(t, org, id, "completed", &statuses)
	requireStatusPath(t, []string{"queued", "running", "waiting", "running", "completed"}, statuses)
	requireExecutedBy(t, onA, id, onA.sys.app.Replica())
}

// TestOrgStreamCatchesUpWithoutNotifications: replica B hears no notification at all (its
// listener stopped: every notification of A's commits is lost to it). Its run stream still
// says every event (it re-reads every Recheck) and its organization stream still follows the
// run (its catch-up read every Recheck): the run parks on a signal, so the stream must say
// waiting before the signal is sent, then completed.
func TestOrgStreamCatchesUpWithoutNotifications(t *testing.T) {
	t.Parallel()
	onA, onB := replicaPair(t, func(c *service.Config) { c.Stream.Recheck = 200 * time.Millisecond })
	onB.sys.app.StopListening()
	onA.workflow(t, "wf_lost", 1, def([]string{manual,
		`{"block_id":"hold","type":"wait","params":{"signal":"go","timeout":"1h"}}`,
		`{"block_id":"after","type":"log","params":{"message":"done"}}`,
	}, edge("start", "hold"), edge("hold", "after")))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	status, org := onB.openStream(t, ctx, "/api/runs/events", "")
	require.Equal(t, http.StatusOK, status)
	// Filtered to completed: only the last status, through the same catch-up.
	status, done := onB.openStream(t, ctx, "/api/runs/events?status=completed&workflowId=wf_lost", "")
	require.Equal(t, http.StatusOK, status)
	id := onA.startRun(t, "wf_lost", nil)
	status, events := onB.openStream(t, ctx, "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, status)

	var statuses []string
	orgStatuses(t, org, id, "waiting", &statuses)
	var lines []string
	for {
		e, ok := next(t, events)
		require.True(t, ok, "the run's stream ended early: %v", lines)
		lines = append(lines, story(e))
		if story(e) == "status waiting signal" {
			break
		}
	}
	require.Equal(t, http.StatusAccepted, onA.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go"}).Status)
	orgStatuses(t, org, id, "completed", &statuses)
	requireStatusPath(t, []string{"queued", "running", "waiting", "running", "completed"}, statuses)
	var only []string
	orgStatuses(t, done, id, "completed", &only)
	require.Equal(t, []string{"completed"}, only)
	for e, ok := next(t, events); ok; e, ok = next(t, events) {
		lines = append(lines, story(e))
	}
	require.Equal(t, []string{
		"status queued", "attempt.started start", "status running", "attempt.finished start succeeded",
		"attempt.started hold", "status waiting signal", "attempt.finished hold succeeded", "status running",
		"attempt.started after", "attempt.finished after succeeded", "status completed",
	}, lines)
	requireExecutedBy(t, onA, id, onA.sys.app.Replica())
}

// TestStatusHorizonWaitsForOpenTransactions: a status change's time is its transaction's start,
// and it may commit long after; the catch-up's horizon stays before the start of every
// transaction still open, so the pass after the commit reads the change.
func TestStatusHorizonWaitsForOpenTransactions(t *testing.T) {
	t.Parallel()
	sys := start(t)
	b := sys.setup(t)
	cfg, err := pgxpool.ParseConfig(sys.dbURL)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = "orchestrator" // as the service's pool
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reader := postgres.NewOrgStatusReader(pool)

	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	var began time.Time
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT now()`).Scan(&began))
	id := wire.NewID(wire.Run)
	_, err = tx.Exec(t.Context(), `INSERT INTO orchestrator.runs (id, organization_id, workflow_id, workflow_version, definition_hash, status, trigger)
		VALUES ($1, $2, 'wf_slow', 1, sha256('{}'), 'queued', '{}')`, id, b.org)
	require.NoError(t, err)
	// Until the open transaction is older than the horizon's margin: a horizon taken from the
	// clock alone would now be past the change's time.
	require.Eventually(t, func() bool {
		var now time.Time
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT clock_timestamp()`).Scan(&now))
		return now.Sub(began) > 2*time.Second
	}, 10*time.Second, 50*time.Millisecond)

	page, h, err := reader.StatusesAfter(t.Context(), b.org, "", port.StatusKey{At: began.Add(-time.Minute)}, 10)
	require.NoError(t, err)
	require.Empty(t, page, "not committed yet")
	require.False(t, h.After(began), "the horizon %s is past the open transaction's start %s", h, began)
	require.NoError(t, tx.Commit(t.Context()))

	page, _, err = reader.StatusesAfter(t.Context(), b.org, "", port.StatusKey{At: h}, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, id, page[0].Run.ID)
	require.True(t, page[0].At.Equal(began), "status_at is the transaction's start")
}

// TestNotifiesOnlyWhileAnotherReplicaWatches: while no other replica has a stream open, A's
// commits send no notification (a run that ends in its dispatch costs no NOTIFY); once B opens
// its first stream, B's heartbeat says so, A notifies again and B's stream follows A's runs.
// A listener of the test's own sees what A sends: nothing of the first run, then the second.
func TestNotifiesOnlyWhileAnotherReplicaWatches(t *testing.T) {
	t.Parallel()
	fast := func(c *service.Config) { c.Heartbeat, c.DeadAfter = 100*time.Millisecond, time.Second }
	a := startWith(t, func(c *service.Config) { allowPrivate(c); fast(c) })
	b := startWith(t, func(c *service.Config) { sameDatabase(a)(c); fast(c) })
	require.NoError(t, b.app.StopWorking(t.Context()))
	onA := a.setup(t)
	onB := &testBundle{sys: b, org: onA.org}
	onA.workflow(t, "wf_quiet", 1, def([]string{manual, `{"block_id":"say","type":"log","params":{"message":"hi"}}`}, edge("start", "say")))
	listen, err := pgx.Connect(t.Context(), onA.sys.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listen.Close(context.WithoutCancel(t.Context())) })
	_, err = listen.Exec(t.Context(), "LISTEN "+pgx.Identifier{runnotify.Channel}.Sanitize())
	require.NoError(t, err)

	require.Eventually(t, func() bool { return !onA.sys.app.NotifiesOthers() }, 10*time.Second, 10*time.Millisecond,
		"A never heard that no other replica has streams open")
	quiet := onA.startRun(t, "wf_quiet", nil)
	onA.waitStatus(t, quiet, "completed")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	status, org := onB.openStream(t, ctx, "/api/runs/events?workflowId=wf_quiet", "")
	require.Equal(t, http.StatusOK, status)
	require.Eventually(t, onA.sys.app.NotifiesOthers, 10*time.Second, 10*time.Millisecond,
		"A never heard of B's stream")
	loud := onA.startRun(t, "wf_quiet", nil)
	// Notifications arrive in the order they were sent: one of the first run would come first.
	for heard := false; !heard; {
		wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
		n, err := listen.WaitForNotification(wctx)
		wcancel()
		require.NoError(t, err, "no notification of the second run")
		require.NotContains(t, n.Payload, quiet, "the first run was notified with no stream open elsewhere")
		heard = strings.Contains(n.Payload, loud)
	}
	var statuses []string
	orgStatuses(t, org, loud, "completed", &statuses)
}
