package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	api "svc.dev/clients/apiclient"
)

// fakeRuns is an API with one run: GET /api/runs/run_1 answers its present state and
// GET /api/runs/run_1/events streams every status it has had, as the orchestrator does
// (from the start, or after Last-Event-ID), until its final status.
type fakeRuns struct {
	mu      sync.Mutex
	run     api.Run
	history []api.Event
	changed chan struct{}
	// noStream answers the stream's route 404, as an API older than the stream does.
	noStream bool
	// dropAfter, when positive, ends the first stream after that many events.
	dropAfter int
	// lastEventIDs are the Last-Event-ID headers the streams were opened with.
	lastEventIDs []string
	gets         atomic.Int32
	streams      atomic.Int32
}

func newFakeRuns(statuses ...string) *fakeRuns {
	f := &fakeRuns{changed: make(chan struct{}), run: api.Run{RunID: "run_1", WorkflowID: "wf_1", Status: "queued"}}
	f.history = append(f.history, f.event("queued", nil))
	for _, s := range statuses {
		f.apply(s, nil)
	}
	return f
}

func (f *fakeRuns) event(status string, waiting *api.Waiting) api.Event {
	b, _ := json.Marshal(map[string]any{"runId": "run_1", "status": status, "waiting": waiting})
	return api.Event{ID: strconv.Itoa(len(f.history) + 1), Kind: "run.status", Data: b}
}

func (f *fakeRuns) apply(status string, waiting *api.Waiting) {
	f.history = append(f.history, f.event(status, waiting))
	f.run.Status, f.run.Waiting = status, waiting
}

// set moves the run to a status and wakes the streams.
func (f *fakeRuns) set(status string, waiting *api.Waiting) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apply(status, waiting)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeRuns) after(d time.Duration, status string, waiting *api.Waiting) {
	time.AfterFunc(d, func() { f.set(status, waiting) })
}

func (f *fakeRuns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/runs/run_1":
		f.gets.Add(1)
		f.mu.Lock()
		b, _ := json.Marshal(f.run)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case "/api/runs/run_1/events":
		f.streams.Add(1)
		if f.noStream {
			http.Error(w, `{"error":"not_found","message":"no such route"}`, http.StatusNotFound)
			return
		}
		f.stream(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not_found","message":"no such run"}`))
	}
}

func (f *fakeRuns) stream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.lastEventIDs = append(f.lastEventIDs, r.Header.Get("Last-Event-ID"))
	drop := f.dropAfter
	f.dropAfter = 0
	f.mu.Unlock()
	next := 0
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		next, _ = strconv.Atoi(id)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	flush()
	sent := 0
	for {
		f.mu.Lock()
		events, changed := f.history[next:], f.changed
		f.mu.Unlock()
		for _, ev := range events {
			fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Kind, ev.Data)
			next++
			if sent++; drop > 0 && sent == drop {
				flush()
				return
			}
			var d statusData
			_ = json.Unmarshal(ev.Data, &d)
			if d.Status == "completed" || d.Status == "failed" || d.Status == "cancelled" {
				flush()
				return
			}
		}
		flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// bufferingTransport answers with an in-process handler and hands the answer over only once
// the handler has returned, as a recorder does: a stream comes through only when it ends.
type bufferingTransport struct{ h http.Handler }

func (b bufferingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	res := rec.Result()
	res.Body = io.NopCloser(bytes.NewReader(rec.Body.Bytes()))
	return res, nil
}

func fastTiming() waitTiming {
	return waitTiming{settle: 200 * time.Millisecond, firstEvent: 300 * time.Millisecond, maxDrops: 2,
		reconnectMin: 10 * time.Millisecond, reconnectMax: 50 * time.Millisecond,
		pollFirst: 50 * time.Millisecond, pollMax: 100 * time.Millisecond}
}

func TestRunsWait(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		api   *fakeRuns
		tools *tools
		p     Principal
	}

	setup := func(t *testing.T, f *fakeRuns, buffered bool) *testBundle {
		t.Helper()
		var hc *http.Client
		base := "http://api.test"
		if buffered {
			hc = &http.Client{Transport: bufferingTransport{h: f}}
		} else {
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			hc, base = srv.Client(), srv.URL
		}
		c, err := api.NewClient(base, hc, "test")
		require.NoError(t, err)
		return &testBundle{api: f, tools: &tools{timing: fastTiming()}, p: Principal{Client: c, Key: "svc_test"}}
	}

	wait := func(t *testing.T, b *testBundle, d time.Duration) RunsWaitOutput {
		t.Helper()
		out, err := b.tools.waitForRun(t.Context(), b.p, "run_1", d)
		require.NoError(t, err)
		return out
	}

	t.Run("EndsWhenTheRunWaitsForASignal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeRuns("running"), false)
		b.api.after(200*time.Millisecond, "waiting", &api.Waiting{BlockID: "hold", Kind: "signal", Signal: "go"})
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Waiting, out)
		require.False(t, out.TimedOut, out)
		require.Equal(t, "go", out.Run.Waiting.Signal)
		// The first read, one stream, and the read of the run once it settled.
		require.EqualValues(t, 2, b.api.gets.Load())
		require.EqualValues(t, 1, b.api.streams.Load())
	})

	t.Run("WaitsTheRunHasLeftDoNotEndIt", func(t *testing.T) {
		t.Parallel()
		f := newFakeRuns("running")
		f.apply("waiting", &api.Waiting{BlockID: "hold", Kind: "signal", Signal: "go"})
		f.apply("running", nil)
		f.apply("waiting", &api.Waiting{BlockID: "nap", Kind: "sleep", Until: "2030-01-01T00:00:00Z"})
		f.apply("running", nil)
		b := setup(t, f, false)
		b.api.after(300*time.Millisecond, "completed", nil)
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Finished, out)
		require.Equal(t, "completed", out.Run.Status)
		require.EqualValues(t, 2, b.api.gets.Load(), "the replayed waits cost no read")
		require.EqualValues(t, 1, b.api.streams.Load())
	})

	t.Run("ASleepUnderWayIsWaitedThrough", func(t *testing.T) {
		t.Parallel()
		f := newFakeRuns("running")
		f.apply("waiting", &api.Waiting{BlockID: "nap", Kind: "sleep", Until: "2030-01-01T00:00:00Z"})
		b := setup(t, f, false)
		b.api.after(300*time.Millisecond, "running", nil)
		b.api.after(400*time.Millisecond, "completed", nil)
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Finished, out)
		require.False(t, out.TimedOut, out)
		require.EqualValues(t, 2, b.api.gets.Load())
	})

	t.Run("ASleepBegunDuringTheCallEndsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeRuns("running"), false)
		b.api.after(100*time.Millisecond, "waiting", &api.Waiting{BlockID: "nap", Kind: "sleep", Until: "2030-01-01T00:00:00Z"})
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Waiting, out)
		require.False(t, out.TimedOut, out)
		require.Equal(t, "sleep", out.Run.Waiting.Kind)
	})

	t.Run("AWaitForASignalUnderWayEndsItAtOnce", func(t *testing.T) {
		t.Parallel()
		f := newFakeRuns("running")
		f.apply("waiting", &api.Waiting{BlockID: "hold", Kind: "signal", Signal: "go"})
		b := setup(t, f, false)
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Waiting, out)
		require.EqualValues(t, 1, b.api.gets.Load())
		require.EqualValues(t, 0, b.api.streams.Load())
	})

	t.Run("TimesOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeRuns("running"), false)
		start := time.Now()
		out := wait(t, b, 400*time.Millisecond)
		require.True(t, out.TimedOut, out)
		require.False(t, out.Waiting || out.Finished, out)
		require.Less(t, time.Since(start), 2*time.Second)
		require.EqualValues(t, 2, b.api.gets.Load(), "the first read and the last")
		require.EqualValues(t, 1, b.api.streams.Load())
	})

	t.Run("ASleepUnderWayThatOutlastsTheTimeout", func(t *testing.T) {
		t.Parallel()
		f := newFakeRuns("running")
		f.apply("waiting", &api.Waiting{BlockID: "nap", Kind: "sleep", Until: "2030-01-01T00:00:00Z"})
		b := setup(t, f, false)
		out := wait(t, b, 300*time.Millisecond)
		require.True(t, out.TimedOut, out)
		require.True(t, out.Waiting, out)
	})

	t.Run("AnAPIWithoutTheStreamIsPolled", func(t *testing.T) {
		t.Parallel()
		f := newFakeRuns("running")
		f.noStream = true
		b := setup(t, f, false)
		b.api.after(200*time.Millisecond, "completed", nil)
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Finished, out)
		require.EqualValues(t, 1, b.api.streams.Load())
		require.LessOrEqual(t, b.api.gets.Load(), int32(6))
	})

	t.Run("AStreamHeldBackIsGivenUpForPolling", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeRuns("running"), true)
		b.api.after(500*time.Millisecond, "waiting", &api.Waiting{BlockID: "hold", Kind: "signal", Signal: "go"})
		start := time.Now()
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Waiting, out)
		require.Less(t, time.Since(start), 2*time.Second)
		require.EqualValues(t, 1, b.api.streams.Load())
	})

	t.Run("AProxyInProcessIsNotAborted", func(t *testing.T) {
		t.Parallel()
		// As over /api/mcp: the call arrives on a server's request, and its API requests are
		// answered in process by a reverse proxy whose answer is handed over whole. Closing
		// the held-back stream must not make the proxy abort with a panic (the test binary
		// would die).
		f := newFakeRuns("running")
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		target, err := url.Parse(srv.URL)
		require.NoError(t, err)
		proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, FlushInterval: -1,
			ErrorLog: log.New(io.Discard, "", 0)}
		c, err := api.NewClient("http://gateway.internal", &http.Client{Transport: bufferingTransport{h: proxy}}, "test")
		require.NoError(t, err)
		tl := &tools{timing: fastTiming()}
		f.after(500*time.Millisecond, "waiting", &api.Waiting{BlockID: "hold", Kind: "signal", Signal: "go"})
		ctx := context.WithValue(t.Context(), http.ServerContextKey, &http.Server{})
		out, err := tl.waitForRun(ctx, Principal{Client: c, Key: "svc_test"}, "run_1", 5*time.Second)
		require.NoError(t, err)
		require.True(t, out.Waiting, out)
	})

	t.Run("AHeldBackStreamThatEndsIsRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeRuns("running"), true)
		b.api.after(100*time.Millisecond, "completed", nil)
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Finished, out)
		require.EqualValues(t, 2, b.api.gets.Load())
	})

	t.Run("ADroppedStreamResumesAfterTheLastEvent", func(t *testing.T) {
		t.Parallel()
		f := newFakeRuns("running")
		f.dropAfter = 2
		b := setup(t, f, false)
		b.api.after(300*time.Millisecond, "completed", nil)
		out := wait(t, b, 5*time.Second)
		require.True(t, out.Finished, out)
		require.EqualValues(t, 2, b.api.streams.Load())
		b.api.mu.Lock()
		defer b.api.mu.Unlock()
		require.Equal(t, []string{"", "2"}, b.api.lastEventIDs)
	})

	t.Run("AnUnknownRunIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFakeRuns(), false)
		_, err := b.tools.waitForRun(t.Context(), b.p, "run_2", time.Second)
		require.Error(t, err)
		require.Contains(t, err.Error(), `"error":"not_found"`)
	})
}

// An API without the stream is read at most five times in any minute of a long wait.
func TestRunsWaitPollsAFewTimesAMinute(t *testing.T) {
	t.Parallel()
	timing := defaultWaitTiming()
	at := []time.Duration{0} // the first read
	pause, now := timing.pollFirst, time.Duration(0)
	for now+pause < maxWaitSeconds*time.Second {
		now += pause
		at = append(at, now)
		pause = timing.nextPoll(pause)
	}
	at = append(at, maxWaitSeconds*time.Second) // the last read, at the timeout
	for i := range at {
		n := 0
		for _, a := range at[i:] {
			if a < at[i]+time.Minute {
				n++
			}
		}
		require.LessOrEqual(t, n, 5, "reads at %v", at)
	}
	require.Less(t, len(at), 12, "reads at %v", at)
}
