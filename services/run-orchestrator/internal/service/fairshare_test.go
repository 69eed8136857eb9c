package service_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/service"
)

// TestQuietOrganizationIsNotQueuedBehindABusyOne: organization A fans one run out to 48
// http.request blocks on an endpoint that takes 150 ms, on a replica of 4 workers. Organization
// B then starts a one-step run. First come, first served, B's job would wait behind all of A's
// queued jobs, and A's workers would go on from block to block of A's run without ever
// returning to the queue; shared fairly, B's job is queued ahead of A's and A's workers yield
// between steps, so B's step runs after the steps A has in hand. The check counts A's requests
// when B's step arrives, so it does not depend on how fast this machine is.
func TestQuietOrganizationIsNotQueuedBehindABusyOne(t *testing.T) {
	t.Parallel()
	const fanOut, workers = 48, 4
	var (
		busyCalls atomic.Int32
		atQuiet   atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quiet" {
			atQuiet.Store(busyCalls.Load())
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
			return
		}
		busyCalls.Add(1)
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	sys := startWith(t, func(c *service.Config) {
		c.AllowPrivateNetwork = true
		c.Workers = workers
	})

	busy := sys.setup(t)
	blocks := []string{manual}
	var edges []string
	for i := range fanOut {
		id := fmt.Sprintf("call%02d", i)
		blocks = append(blocks, `{"block_id":"`+id+`","type":"http.request","params":{"method":"GET","url":"`+srv.URL+`/busy"}}`)
		edges = append(edges, edge("start", id))
	}
	busy.workflow(t, "wf_flood", 1, def(blocks, edges...))
	flood := busy.startRun(t, "wf_flood", nil)
	require.Eventually(t, func() bool { return busyCalls.Load() >= workers }, 15*time.Second, 5*time.Millisecond,
		"the busy organization's fan-out never took the workers")

	quiet := sys.setup(t)
	quiet.workflow(t, "wf_one", 1, def([]string{manual,
		`{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + srv.URL + `/quiet"}}`,
	}, edge("start", "call")))
	one := quiet.startRun(t, "wf_one", nil)

	quiet.waitStatus(t, one, "completed")
	seen := atQuiet.Load()
	t.Logf("the busy organization had made %d of its %d calls when the quiet one's step ran", seen, fanOut)
	// In hand when B started: at most the workers' calls, plus those whose jobs were taken
	// while B's dispatch committed. First come, first served, it would be nearly all 48.
	require.LessOrEqual(t, seen, int32(3*workers), "the quiet organization's step waited behind the busy one's queue")
	busy.waitStatus(t, flood, "completed")
	require.EqualValues(t, fanOut, busyCalls.Load())
}

// TestOrganizationCeiling: with a ceiling of 2 of a replica's 4 workers, an organization's
// 12-way fan-out on a slow endpoint never has more than 2 calls in flight, and finishes; the
// other workers stay free, so another organization's one-step run is not held behind it.
func TestOrganizationCeiling(t *testing.T) {
	t.Parallel()
	const fanOut = 12
	var (
		inFlight, most, busyCalls, atQuiet atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quiet" {
			atQuiet.Store(busyCalls.Load())
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
			return
		}
		busyCalls.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	sys := startWith(t, func(c *service.Config) {
		c.AllowPrivateNetwork = true
		c.Workers = 4
		c.OrgCeiling = 2
	})

	busy := sys.setup(t)
	blocks := []string{manual}
	var edges []string
	for i := range fanOut {
		id := fmt.Sprintf("call%02d", i)
		blocks = append(blocks, `{"block_id":"`+id+`","type":"http.request","params":{"method":"GET","url":"`+srv.URL+`/busy"}}`)
		edges = append(edges, edge("start", id))
	}
	busy.workflow(t, "wf_flood", 1, def(blocks, edges...))
	flood := busy.startRun(t, "wf_flood", nil)
	require.Eventually(t, func() bool { return busyCalls.Load() >= 1 }, 15*time.Second, 5*time.Millisecond)

	quiet := sys.setup(t)
	quiet.workflow(t, "wf_one", 1, def([]string{manual,
		`{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + srv.URL + `/quiet"}}`,
	}, edge("start", "call")))
	quiet.waitStatus(t, quiet.startRun(t, "wf_one", nil), "completed")
	busy.waitStatus(t, flood, "completed")
	t.Logf("at most %d calls in flight; the quiet run's step came after %d of %d", most.Load(), atQuiet.Load(), fanOut)
	require.LessOrEqual(t, most.Load(), int32(2), "the organization held more than its ceiling of workers")
	require.EqualValues(t, fanOut, busyCalls.Load())
	require.Less(t, atQuiet.Load(), int32(fanOut), "the quiet organization waited for the whole fan-out")
}

// TestQueuedRunSaysWhyItWaits: on a replica of one worker held by organization A's call, A's
// second run and B's run wait in the queue. B's, tagged right after the work in hand, is next
// in line; A's waits behind it, and each run's queue says so, as does the run's event stream
// (run.queue).
func TestQueuedRunSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var held atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	sys := startWith(t, func(c *service.Config) {
		c.AllowPrivateNetwork = true
		c.Workers = 1
	})
	call := func(path string) string {
		return def([]string{manual, `{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + srv.URL + path + `"}}`}, edge("start", "call"))
	}
	a, b := sys.setup(t), sys.setup(t)
	a.workflow(t, "wf_hold", 1, call("/hold"))
	a.workflow(t, "wf_a", 1, call("/a"))
	b.workflow(t, "wf_b", 1, call("/b"))
	first := a.startRun(t, "wf_hold", nil)
	require.Eventually(t, func() bool { return held.Load() == 1 }, 15*time.Second, 5*time.Millisecond)
	second := a.startRun(t, "wf_a", nil)
	other := b.startRun(t, "wf_b", nil)

	queue := func(bundle *testBundle, id string) map[string]any {
		r := bundle.do(t, "GET", "/api/runs/"+id, nil)
		require.Equal(t, "queued", r.Body["status"], r.Raw)
		q, ok := r.Body["queue"].(map[string]any)
		require.True(t, ok, "a queued run says why it waits: %s", r.Raw)
		return q
	}
	qb := queue(b, other)
	require.Equal(t, "waiting_for_worker", qb["reason"])
	require.Equal(t, "waiting for a worker: next in line", qb["message"])
	qa := queue(a, second)
	require.Equal(t, "waiting_for_worker", qa["reason"])
	require.EqualValues(t, 1, qa["ahead"], qa)
	require.Equal(t, "waiting for a worker: 1 job of other organizations queued ahead (organizations take turns)", qa["message"])

	// The run's event stream says it too, while it waits.
	sctx, stopStream := context.WithCancel(t.Context())
	defer stopStream()
	status, events := a.openStream(t, sctx, "/api/runs/"+second+"/events", "")
	require.Equal(t, http.StatusOK, status)
	var queued map[string]any
	for e := range events {
		if e.Kind == "run.queue" {
			queued, _ = e.Data["queue"].(map[string]any)
			break
		}
	}
	require.NotNil(t, queued, "the queued run's stream sends run.queue")
	require.Equal(t, "waiting_for_worker", queued["reason"])
	require.Equal(t, qa["message"], queued["message"])
	stopStream()

	close(release)
	released = true
	for _, id := range []string{first, second} {
		got := a.waitStatus(t, id, "completed")
		require.Nil(t, got["queue"])
	}
	b.waitStatus(t, other, "completed")
}
