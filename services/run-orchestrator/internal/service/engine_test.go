package service_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/service"
)

// sameDatabase makes a second replica share the first one's database.
func sameDatabase(first *system) func(*service.Config) {
	return func(c *service.Config) {
		c.Base.DatabaseURL = first.dbURL
		c.AllowPrivateNetwork = true
	}
}

func allowPrivate(c *service.Config) { c.AllowPrivateNetwork = true }

// TestParallelBranchesRunAtOnce: two blocks ready together run at the same time (each has a
// job of its own). The server answers neither request until both have arrived, so a run that
// took them one after the other would never get past the first.
func TestParallelBranchesRunAtOnce(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		arrived  int
		both     = make(chan struct{})
		sawBoth  atomic.Bool
		requests atomic.Int32
	)
	barrier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
			sawBoth.Store(true)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		case <-time.After(5 * time.Second):
			http.Error(w, "the other branch never came", http.StatusGatewayTimeout)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(barrier.Close)
	sys := startWith(t, allowPrivate)
	b := sys.setup(t)
	b.workflow(t, "wf_fan", 1, def([]string{manual,
		`{"block_id":"left","type":"http.request","params":{"method":"GET","url":"` + barrier.URL + `/left"}}`,
		`{"block_id":"right","type":"http.request","params":{"method":"GET","url":"` + barrier.URL + `/right"}}`,
		`{"block_id":"join","type":"log","params":{"message":"{{ steps.left.output.status }} {{ steps.right.output.status }}"}}`,
	}, edge("start", "left"), edge("start", "right"), edge("left", "join"), edge("right", "join")))

	id := b.startRun(t, "wf_fan", nil)
	got := b.waitStatus(t, id, "completed")
	require.True(t, sawBoth.Load(), "the two branches never ran at the same time")
	require.EqualValues(t, 2, requests.Load(), "each branch ran once")
	require.Equal(t, map[string]any{"join": map[string]any{"message": "200 200"}}, got["output"])
	logs := b.logs(t, id)
	for _, block := range []string{"left", "right", "join"} {
		bl := blockLogs(logs, block)
		require.Len(t, bl, 1, block)
		require.Equal(t, "succeeded", bl[0]["status"], block)
	}
}

// hangingServer answers nothing until its request is cancelled; it reports arrivals and
// cancellations.
func hangingServer(t *testing.T) (url string, arrived, gone <-chan struct{}) {
	t.Helper()
	a, g, done := make(chan struct{}, 10), make(chan struct{}, 10), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a <- struct{}{}
		select {
		case <-r.Context().Done():
			g <- struct{}{}
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	return srv.URL, a, g
}

func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatal(what)
	}
}

// TestCancelOfAStepRunningOnAnotherReplica: the cancel request reaches one replica while the
// step runs on another; the step's connector call is cancelled there (River's job-cancel
// notification), the attempt is recorded cancelled, and nothing else starts.
func TestCancelOfAStepRunningOnAnotherReplica(t *testing.T) {
	t.Parallel()
	url, arrived, gone := hangingServer(t)
	first := startWith(t, allowPrivate)
	second := startWith(t, sameDatabase(first))
	pool := db(t, first.dbURL)
	b1 := first.setup(t)
	b2 := &testBundle{sys: second, org: b1.org}
	b1.workflow(t, "wf_hang", 1, def([]string{manual,
		`{"block_id":"slow","type":"http.request","params":{"method":"GET","url":"` + url + `","timeout_ms":60000}}`,
		`{"block_id":"after","type":"log","params":{"message":"never runs"}}`,
	}, edge("start", "slow"), edge("slow", "after")))

	id := b1.startRun(t, "wf_hang", nil)
	within(t, arrived, 15*time.Second, "the step never reached the server")
	var replica string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT replica FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'slow'`, id).Scan(&replica))
	// Cancel through the replica that is not running the step.
	other := b1
	if replica == first.app.Replica() {
		other = b2
	} else {
		require.Equal(t, second.app.Replica(), replica)
	}
	r := other.do(t, "POST", "/api/runs/"+id+"/cancel", nil)
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	within(t, gone, 15*time.Second, "the step's connector call on the other replica was not cancelled")

	logs := b1.logs(t, id)
	require.Len(t, logs, 2, "start and slow only: nothing starts after the cancel")
	slow := blockLogs(logs, "slow")
	require.Len(t, slow, 1)
	require.Equal(t, "cancelled", slow[0]["status"])
	require.Equal(t, "cancelled", b1.do(t, "GET", "/api/runs/"+id, nil).Body["status"])
	// The worker that ran the step finished its job without writing anything more.
	require.Eventually(t, func() bool {
		var running int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.river_job WHERE args->>'run_id' = $1 AND state = 'running'`, id).Scan(&running))
		return running == 0
	}, 10*time.Second, 10*time.Millisecond, "a job of the cancelled run is still running")
	require.Len(t, b1.logs(t, id), 2)
}

// TestGracefulShutdownHandsTheRunBack: a replica told to stop while a step runs lets the step
// finish and records its result, then hands the run back instead of starting the next block;
// another replica finishes the run. Nothing is lost and nothing runs twice.
func TestGracefulShutdownHandsTheRunBack(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(slow.Close)
	leaving := startWith(t, allowPrivate)
	pool := db(t, leaving.dbURL)
	b := leaving.setup(t)
	b.workflow(t, "wf_slow", 1, slowWorkflow(slow.URL))

	id := b.startRun(t, "wf_slow", nil)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 15*time.Second, 5*time.Millisecond, "the slow step never started")
	staying := startWith(t, sameDatabase(leaving))

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		leaving.app.Close()
	}()
	within(t, leaving.app.Stopping(), 5*time.Second, "the engine never began to stop")
	close(release) // the step in flight finishes after the stop began
	within(t, stopped, 15*time.Second, "the leaving replica did not stop")

	bs := &testBundle{sys: staying, org: b.org}
	got := bs.waitStatus(t, id, "completed")
	require.Equal(t, map[string]any{"after": map[string]any{"message": "after 200"}}, got["output"])
	logs := bs.logs(t, id)
	require.Len(t, logs, 3, "start, slow and after, once each: %v", logs)
	for _, l := range logs {
		require.Equal(t, "succeeded", l["status"], l)
	}
	require.EqualValues(t, 1, calls.Load(), "the slow step ran once")
	var slowReplica, afterReplica string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT replica FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'slow'`, id).Scan(&slowReplica))
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT replica FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'after'`, id).Scan(&afterReplica))
	require.Equal(t, leaving.app.Replica(), slowReplica, "the step in flight finished on the leaving replica")
	require.Equal(t, staying.app.Replica(), afterReplica, "the next block ran on the replica that stayed")
}

// TestPrivateTargetFailsAtOnce (issue 22): with the private-network policy on (the default), an
// http.request to a loopback address cannot succeed on any retry: its one attempt fails with
// code private_network_refused and a message naming the setting that allows such targets, no
// retry is scheduled though the connector's policy allows 3 attempts, and the run fails.
func TestPrivateTargetFailsAtOnce(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	local := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(local.Close)
	sys := start(t)
	b := sys.setup(t)
	b.workflow(t, "wf_private", 1, def([]string{manual,
		`{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + local.URL + `/health"}}`,
	}, edge("start", "call")))

	id := b.startRun(t, "wf_private", nil)
	got := b.waitStatus(t, id, "failed")
	msg := got["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, "SVC_HTTP_ALLOW_PRIVATE=1", "the run's error names the setting")
	attempts := blockLogs(b.logs(t, id), "call")
	require.Len(t, attempts, 1, "not retried: %v", attempts)
	require.Equal(t, "failed", attempts[0]["status"])
	errBody := attempts[0]["error"].(map[string]any)
	require.Equal(t, "private_network_refused", errBody["code"])
	require.Contains(t, errBody["message"], "GET "+local.URL+"/health: 127.0.0.1 is a loopback, private or link-local address, "+
		"refused by the private-network policy (SVC_HTTP_ALLOW_PRIVATE=1 on run-orchestrator allows such targets")
	require.Nil(t, attempts[0]["retry_at"], "no retry is scheduled")
	require.Zero(t, hits.Load(), "nothing was sent")
}
