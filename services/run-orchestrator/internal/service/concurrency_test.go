package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// counter is an endpoint that counts the calls in progress per key (the path), and the most
// seen at once; each call takes hold, or waits for its gate when the key has one.
type counter struct {
	mu      sync.Mutex
	now     map[string]int
	most    map[string]int
	calls   atomic.Int32
	gates   map[string]chan struct{}
	arrived chan string
	hold    time.Duration
}

func newCounter(t *testing.T, hold time.Duration, gated ...string) (*counter, string) {
	t.Helper()
	c := &counter{now: map[string]int{}, most: map[string]int{}, gates: map[string]chan struct{}{}, arrived: make(chan string, 100), hold: hold}
	for _, g := range gated {
		c.gates[g] = make(chan struct{})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/")
		c.calls.Add(1)
		c.mu.Lock()
		c.now[key]++
		c.most[key] = max(c.most[key], c.now[key])
		gate := c.gates[key]
		c.mu.Unlock()
		c.arrived <- key
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		} else {
			time.Sleep(c.hold) // the step's work, not a wait for a state
		}
		c.mu.Lock()
		c.now[key]--
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *counter) mostAt(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most[key]
}

// limited is a workflow whose manual trigger declares concurrency (conc, a JSON object) and
// whose one step calls url/<key value>.
func limited(conc, url string) string {
	return def([]string{`{"block_id":"start","type":"trigger.manual","params":{"concurrency":` + conc + `}}`,
		`{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + url + `/{{ input.customer }}","timeout_ms":60000}}`,
	}, edge("start", "call"))
}

// startAll starts n runs of wf at once with input, and returns their ids in start order (the
// order of their ids: a run's id is taken when its start arrives).
func (b *testBundle) startAll(t *testing.T, wf string, n int, input map[string]any) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i] = b.startRun(t, wf, map[string]any{"input": input}) })
	}
	wg.Wait()
	slices.Sort(ids)
	return ids
}

// queueOf is the queue member of GET /api/runs/:id (nil when null).
func (b *testBundle) queueOf(t *testing.T, id string) map[string]any {
	t.Helper()
	r := b.do(t, "GET", "/api/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Contains(t, r.Body, "queue", "the run shape has queue, null when not held back")
	q, _ := r.Body["queue"].(map[string]any)
	return q
}

// TestConcurrencyLimit: at most limit runs of one workflow and key are in progress; the rest
// wait queued, say why, and are admitted in start order as runs end (completed, failed or
// cancelled); keys keep groups apart; a queued run cancelled never held a slot.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	sys := startWith(t, allowPrivate)

	t.Run("NeverMoreThanTheLimit", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		cnt, url := newCounter(t, 150*time.Millisecond)
		b.workflow(t, "wf_lim", 1, limited(`{"limit":2,"key":"{{ input.customer }}"}`, url))
		ids := b.startAll(t, "wf_lim", 6, map[string]any{"customer": "acme"})

		// While the first two run, a run held back says why.
		var q map[string]any
		require.Eventually(t, func() bool { q = b.queueOf(t, ids[5]); return q != nil }, 15*time.Second, 5*time.Millisecond)
		require.Equal(t, "concurrency_limit", q["reason"])
		require.Equal(t, "acme", q["key"])
		require.EqualValues(t, 2, q["limit"])
		require.Equal(t, `waiting for a slot: 2 of 2 runs of this workflow with key "acme" are in progress`, q["message"])
		require.Equal(t, "queued", b.do(t, "GET", "/api/runs/"+ids[5], nil).Body["status"])

		for _, id := range ids {
			got := b.waitStatus(t, id, "completed")
			require.Nil(t, got["queue"])
		}
		require.Equal(t, 2, cnt.mostAt("acme"), "never more than the limit in progress, and the limit used")
		require.EqualValues(t, 6, cnt.calls.Load())

		// Admitted in start order: each held run's admission is logged after the one before.
		pool := db(t, sys.dbURL)
		var admittedAt []time.Time
		for _, id := range ids {
			var at *time.Time
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT max(at) FILTER (WHERE status = 'queued' AND queue IS NULL) FROM orchestrator.run_statuses WHERE run_id = $1`, id).Scan(&at))
			if at != nil {
				admittedAt = append(admittedAt, *at)
			}
		}
		require.Len(t, admittedAt, 4, "the first two were admitted at their start, the other four held")
		require.True(t, slices.IsSortedFunc(admittedAt, func(a, b time.Time) int { return a.Compare(b) }), "admitted out of start order: %v", admittedAt)
	})

	t.Run("KeysApartAndCancelOfAQueuedRun", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		cnt, url := newCounter(t, 0, "A")
		b.workflow(t, "wf_keys", 1, limited(`{"limit":1,"key":"{{ input.customer }}"}`, url))
		a1 := b.startRun(t, "wf_keys", map[string]any{"input": map[string]any{"customer": "A"}})
		require.Equal(t, "A", <-cnt.arrived)
		a2 := b.startRun(t, "wf_keys", map[string]any{"input": map[string]any{"customer": "A"}})
		a3 := b.startRun(t, "wf_keys", map[string]any{"input": map[string]any{"customer": "A"}})
		// Key B is a group of its own: A's backlog does not hold it.
		bID := b.startRun(t, "wf_keys", map[string]any{"input": map[string]any{"customer": "B"}})
		b.waitStatus(t, bID, "completed")
		require.Equal(t, `waiting for a slot: 1 of 1 runs of this workflow with key "A" are in progress`, b.queueOf(t, a2)["message"])

		// Cancelling a held run works and frees nothing: a2 stays held while a1 runs.
		r := b.do(t, "POST", "/api/runs/"+a3+"/cancel", nil)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		got := b.waitStatus(t, a3, "cancelled")
		require.Nil(t, got["queue"])
		require.NotNil(t, b.queueOf(t, a2), "the cancel of a run that held no slot admitted another")
		require.Equal(t, "queued", b.do(t, "GET", "/api/runs/"+a2, nil).Body["status"])

		close(cnt.gates["A"])
		b.waitStatus(t, a1, "completed")
		b.waitStatus(t, a2, "completed")
		require.Empty(t, b.logs(t, a3), "a run cancelled while held never ran")
		require.Equal(t, 1, cnt.mostAt("A"))
	})

	t.Run("AFailedRunReleasesItsSlot", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_fail", 1, def([]string{`{"block_id":"start","type":"trigger.manual","params":{"concurrency":{"limit":1}}}`,
			`{"block_id":"boom","type":"fail","params":{"message":"no"}}`}, edge("start", "boom")))
		var ids []string // started one after the other: the first is admitted, the others held
		for range 3 {
			ids = append(ids, b.startRun(t, "wf_fail", nil))
		}
		for _, id := range ids {
			got := b.waitStatus(t, id, "failed")
			require.Nil(t, got["queue"])
		}
		// Each next run was admitted by the transaction that failed the one before (not later,
		// by the sweep's catch-up of stranded runs).
		pool := db(t, sys.dbURL)
		for i := 1; i < len(ids); i++ {
			var gap time.Duration
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT extract(epoch FROM s.at - p.finished_at) * interval '1 second'
				FROM orchestrator.run_statuses s, orchestrator.runs p
				WHERE s.run_id = $1 AND s.status = 'queued' AND s.queue IS NULL AND p.id = $2`, ids[i], ids[i-1]).Scan(&gap))
			require.Less(t, gap, time.Second, "run %d was admitted %s after run %d failed", i, gap, i-1)
		}
	})

	t.Run("HeldAndAdmittedAreEventsOfTheStream", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		cnt, url := newCounter(t, 0, "S")
		b.workflow(t, "wf_ev", 1, limited(`{"limit":1,"key":"{{ input.customer }}"}`, url))
		first := b.startRun(t, "wf_ev", map[string]any{"input": map[string]any{"customer": "S"}})
		require.Equal(t, "S", <-cnt.arrived)
		held := b.startRun(t, "wf_ev", map[string]any{"input": map[string]any{"customer": "S"}})
		close(cnt.gates["S"])
		b.waitStatus(t, first, "completed")
		b.waitStatus(t, held, "completed")

		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		status, events := b.openStream(t, ctx, "/api/runs/"+held+"/events", "")
		require.Equal(t, http.StatusOK, status)
		var statuses []map[string]any
		for e := range events {
			if e.Kind == "run.status" {
				statuses = append(statuses, e.Data)
			}
		}
		require.GreaterOrEqual(t, len(statuses), 5, "%v", statuses)
		require.Equal(t, "queued", statuses[0]["status"])
		require.Nil(t, statuses[0]["queue"])
		require.Equal(t, "queued", statuses[1]["status"], "held: %v", statuses)
		q, _ := statuses[1]["queue"].(map[string]any)
		require.NotNil(t, q, "the held status carries why: %v", statuses[1])
		require.Equal(t, `waiting for a slot: 1 of 1 runs of this workflow with key "S" are in progress`, q["message"])
		require.Equal(t, "queued", statuses[2]["status"], "admitted: %v", statuses)
		require.Nil(t, statuses[2]["queue"], "admitted: no longer held")
		require.Equal(t, "running", statuses[3]["status"])
		require.Equal(t, "completed", statuses[len(statuses)-1]["status"])
	})

	t.Run("KeyThatCannotBeEvaluatedRefusesTheStart", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		_, url := newCounter(t, 0)
		b.workflow(t, "wf_bad", 1, limited(`{"limit":1,"key":"{{ input.customer }}"}`, url))
		for name, input := range map[string]any{
			"Missing": map[string]any{"other": 1},
			"Object":  map[string]any{"customer": map[string]any{"id": 1}},
			"TooLong": map[string]any{"customer": strings.Repeat("x", 201)},
			"NoInput": nil,
		} {
			r := b.do(t, "POST", "/api/workflows/wf_bad/run", map[string]any{"input": input})
			require.Equal(t, http.StatusBadRequest, r.Status, name+": "+r.Raw)
			require.Equal(t, "invalid_body", r.Body["error"], name)
			require.Contains(t, r.Body["message"], "concurrency key", name)
			require.NotEmpty(t, r.Body["issues"], name)
		}
		list := b.do(t, "GET", "/api/workflows/wf_bad/runs", nil)
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		require.Empty(t, list.Body["items"], "nothing was stored")
		// A number is a key.
		id := b.startRun(t, "wf_bad", map[string]any{"input": map[string]any{"customer": 42}})
		b.waitStatus(t, id, "completed")
	})
}

// TestConcurrencyLimitAcrossReplicas: two replicas sharing a database never exceed the limit
// together, and every run completes.
func TestConcurrencyLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	first := startWith(t, allowPrivate)
	second := startWith(t, sameDatabase(first))
	b1 := first.setup(t)
	b2 := &testBundle{sys: second, org: b1.org}
	cnt, url := newCounter(t, 100*time.Millisecond)
	b1.workflow(t, "wf_rep", 1, limited(`{"limit":2,"key":"{{ input.customer }}"}`, url))
	b2.workflow(t, "wf_rep", 1, limited(`{"limit":2,"key":"{{ input.customer }}"}`, url))

	const n = 12
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		b := b1
		if i%2 == 1 {
			b = b2
		}
		wg.Go(func() { ids[i] = b.startRun(t, "wf_rep", map[string]any{"input": map[string]any{"customer": "acme"}}) })
	}
	wg.Wait()
	for _, id := range ids {
		b1.waitStatus(t, id, "completed")
	}
	require.Equal(t, 2, cnt.mostAt("acme"), "the replicas together never exceed the limit")
	require.EqualValues(t, n, cnt.calls.Load())
}
