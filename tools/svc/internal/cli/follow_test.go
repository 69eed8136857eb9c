package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The fake clock of runAgainst is 2026-11-22T06:00:00Z; times below are relative to it.
const (
	evFlakyStarted  = "id: 3.2\nevent: attempt.started\ndata: {\"runId\":\"run_1\",\"seq\":3,\"attemptId\":\"att_1\",\"block_id\":\"flaky\",\"type\":\"fail\",\"attempt\":1,\"status\":\"running\",\"startedAt\":\"2026-11-22T05:59:59.000Z\"}\n\n"
	evFlakyFailed   = "id: 4.2\nevent: attempt.finished\ndata: {\"runId\":\"run_1\",\"seq\":4,\"attemptId\":\"att_1\",\"block_id\":\"flaky\",\"type\":\"fail\",\"attempt\":1,\"status\":\"failed\",\n" + "data: \"startedAt\":\"2026-11-22T05:59:59.000Z\",\"finishedAt\":\"2026-11-22T05:59:59.010Z\",\"durationMs\":10,\"error\":{\"message\":\"first try fails\"},\"outputBytes\":0,\"retry_at\":\"2026-11-22T06:00:01.500Z\"}\n\n"
	evFlakyLost     = "id: 5.2\nevent: attempt.finished\ndata: {\"block_id\":\"flaky\",\"type\":\"fail\",\"attempt\":2,\"status\":\"lost\",\"finishedAt\":\"2026-11-22T06:00:02.000Z\",\"retry_at\":\"2026-11-22T06:00:03.000Z\"}\n\n"
	evWaitingSleep  = "id: 6.3\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":6,\"workflowId\":\"wf_1\",\"status\":\"waiting\",\"waiting\":{\"block_id\":\"nap\",\"kind\":\"sleep\",\"until\":\"2026-11-22T06:00:00.300Z\"}}\n\n"
	evWaitingSignal = "id: 7.3\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":7,\"workflowId\":\"wf_1\",\"status\":\"waiting\",\"waiting\":{\"block_id\":\"hold\",\"kind\":\"signal\",\"signal\":\"go\",\"until\":\"2026-11-22T07:00:00Z\"}}\n\n"
	evCompleted     = "id: 9.4\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":9,\"workflowId\":\"wf_1\",\"status\":\"completed\",\"at\":\"2026-11-22T06:00:05Z\"}\n\n"
	runCompleted    = `{"runId":"run_1","workflowId":"wf_1","workflowVersion":1,"status":"completed","output":{"done":{"by":"cli"}}}`
)

func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, c := range chunks {
		_, _ = io.WriteString(w, c)
		w.(http.Flusher).Flush()
	}
}

func TestFollowRendersTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	f.routes["GET /api/runs/run_1/events"] = func(w http.ResponseWriter, _ *http.Request) {
		sse(w, ": heartbeat\n\n", evFlakyStarted, evFlakyFailed, evFlakyLost, evWaitingSleep, ": heartbeat\n\n", evWaitingSignal, evCompleted)
	}
	f.on("GET /api/runs/run_1", 200, runCompleted)

	t.Run("Human", func(t *testing.T) {
		r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow", "-o", "table")
		require.Equal(t, 0, r.code, r)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 6, r.stdout)
		require.Regexp(t, `flaky#1 +fail +running$`, lines[0])
		require.Regexp(t, `flaky#1 +fail +failed +10ms  error: first try fails; retrying at \S+ \(in 1\.5s\)$`, lines[1])
		require.Regexp(t, `flaky#2 +fail +lost +lost: its worker stopped answering; retrying at \S+ \(in 3s\)$`, lines[2])
		require.Regexp(t, `run waiting: sleep at nap, until \S+ \(in 300ms\)$`, lines[3])
		require.Regexp(t, `run waiting: signal "go" at hold, times out at \S+ \(in 1h0m0s\) \(send it: svc runs signal run_1 --name go\)$`, lines[4])
		require.Equal(t, `Run run_1 completed. Output: {"done":{"by":"cli"}}`, lines[5])
		require.Empty(t, r.stderr)
	})

	t.Run("JSONLines", func(t *testing.T) {
		r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow")
		require.Equal(t, 0, r.code, r)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 7, r.stdout)
		require.True(t, strings.HasPrefix(lines[0], `{"event":"attempt.started","id":"3.2","runId":"run_1",`), lines[0])
		var failed map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[1]), &failed))
		require.Equal(t, "attempt.finished", failed["event"])
		require.Equal(t, "failed", failed["status"])
		require.Equal(t, "2026-11-22T06:00:01.500Z", failed["retry_at"])
		require.Equal(t, map[string]any{"message": "first try fails"}, failed["error"])
		require.Contains(t, lines[4], `"waiting":{"block_id":"hold","kind":"signal","signal":"go"`)
		require.True(t, strings.HasPrefix(lines[5], `{"event":"run.status","id":"9.4",`), lines[5])
		require.Equal(t, runCompleted, lines[6], "the last line is the ended run")
	})
}

func TestFollowReconnectsWithLastEventID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	var (
		mu   sync.Mutex
		seen []string
	)
	f.routes["GET /api/runs/run_1/events"] = func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Last-Event-ID"))
		n := len(seen)
		mu.Unlock()
		switch n {
		case 1: // drops after two events, the second one cut in its middle
			sse(w, evFlakyStarted, evFlakyFailed, evWaitingSleep[:20])
		case 2:
			panic(http.ErrAbortHandler) // a connection reset before any answer
		default:
			sse(w, evWaitingSleep, evCompleted)
		}
	}
	f.on("GET /api/runs/run_1", 200, runCompleted)
	r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow")
	require.Equal(t, 0, r.code, r)
	require.Equal(t, []string{"", "4.2", "4.2"}, seen, "each reconnect resumes after the last whole event")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 5, r.stdout)
	require.Contains(t, lines[2], `"id":"6.3"`)
	require.Equal(t, 1, strings.Count(r.stdout, `"id":"4.2"`), "nothing repeated")
}

func TestFollowFallsBackToPolling(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		events http.HandlerFunc
		note   string
	}{
		{"NoRoute", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"error":"not_found","message":"no route"}`, http.StatusNotFound)
		}, "the API does not stream run events (HTTP 404); following by polling"},
		{"MethodNotAllowed", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusMethodNotAllowed)
		}, "(HTTP 405); following by polling"},
		{"NotAStream", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"runId":"run_1"}`)
		}, `(Content-Type "application/json"); following by polling`},
		{"StreamEndsAtOnce", func(w http.ResponseWriter, _ *http.Request) { sse(w) },
			"the event stream cannot be read (it ended at once); following by polling"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			f := newFakeAPI(t)
			b.login(t, f.srv.URL, 0)
			f.routes["GET /api/runs/run_1/events"] = tt.events
			f.routes["GET /api/runs/run_1"] = waitingThen(`{"runId":"run_1","status":"failed","error":{"block_id":"boom","message":"kaboom"}}`)
			f.on("GET /api/runs/run_1/logs", 200, `{"items":[{"id":"att_1","block_id":"boom","type":"fail","attempt":1,"status":"failed","error":{"message":"kaboom"}}],"nextCursor":"c1"}`)

			r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow", "-o", "table")
			require.Equal(t, 1, r.code, r)
			require.Contains(t, r.stderr, tt.note)
			require.Contains(t, r.stderr, "svc: run run_1 failed: block boom: kaboom\n")
			require.Contains(t, r.stdout, `run waiting: signal "go" at hold (send it: svc runs signal run_1 --name go)`)
			require.Contains(t, r.stdout, "boom#1")
			require.Contains(t, r.stdout, "Run run_1 failed.")
			require.GreaterOrEqual(t, f.called("GET /api/runs/run_1/logs"), 1)
		})
	}
}

func TestFollowStopsOnTheRunsError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	f.on("GET /api/runs/run_1/events", 400, `{"error":"invalid_query","message":"lastEventId: not an id this stream issued"}`)
	r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow")
	require.Equal(t, 1, r.code, r)
	require.Contains(t, r.stderr, "invalid_query")
	require.Equal(t, 1, f.called("GET /api/runs/run_1/events"), "an API refusal is not retried")
}

// TestLogsReadPastShortPages (issue 21): the API stops a page of logs at a byte budget, so a
// page shorter than the limit is not the end; `svc runs logs` reads on until a page is empty
// and prints every attempt once.
func TestLogsReadPastShortPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	f.routes["GET /api/runs/run_1/logs"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("after") {
		case "":
			_, _ = io.WriteString(w, `{"items":[{"id":"att_1","block_id":"a","type":"transform","attempt":1,"status":"succeeded"}],"nextCursor":"c1"}`)
		case "c1":
			_, _ = io.WriteString(w, `{"items":[{"id":"att_2","block_id":"b","type":"transform","attempt":1,"status":"succeeded"}],"nextCursor":"c2"}`)
		default:
			_, _ = io.WriteString(w, `{"items":[],"nextCursor":"c2"}`)
		}
	}
	r := b.runAgainst(t, f, "runs", "logs", "run_1")
	require.Equal(t, 0, r.code, r)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &items), r.stdout)
	require.Len(t, items, 2, r.stdout)
	require.Equal(t, "att_1", items[0]["id"])
	require.Equal(t, "att_2", items[1]["id"])
	require.Equal(t, 3, f.called("GET /api/runs/run_1/logs"))
}

// stamps are the times of day the human lines of out begin with, the final line left out.
func stamps(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got []string
	for _, l := range lines[:len(lines)-1] {
		require.Regexp(t, `^\d\d:\d\d:\d\d\.\d\d\d  `, l)
		got = append(got, l[:12])
	}
	return got
}

// TestFollowPrintsInTimeOrder (issue 22): a stream opened on a run under way replays its events
// at once. Each status is printed at the time the run took it (statusAt), not at the time it
// arrives, so the lines stay in time order.
func TestFollowPrintsInTimeOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	f.routes["GET /api/runs/run_1/events"] = func(w http.ResponseWriter, _ *http.Request) {
		sse(w,
			"id: 0.1\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":0,\"status\":\"queued\",\"statusAt\":\"2026-11-22T05:40:00.100Z\"}\n\n",
			"id: 1.1\nevent: attempt.started\ndata: {\"runId\":\"run_1\",\"seq\":1,\"block_id\":\"start\",\"type\":\"trigger.manual\",\"attempt\":1,\"status\":\"running\",\"startedAt\":\"2026-11-22T05:40:00.200Z\"}\n\n",
			"id: 2.2\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":2,\"status\":\"running\",\"statusAt\":\"2026-11-22T05:40:00.200Z\"}\n\n",
			"id: 3.2\nevent: attempt.finished\ndata: {\"runId\":\"run_1\",\"seq\":3,\"block_id\":\"start\",\"type\":\"trigger.manual\",\"attempt\":1,\"status\":\"succeeded\",\"startedAt\":\"2026-11-22T05:40:00.200Z\",\"finishedAt\":\"2026-11-22T05:40:00.250Z\",\"durationMs\":50,\"outputBytes\":2}\n\n",
			"id: 4.3\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":4,\"status\":\"waiting\",\"statusAt\":\"2026-11-22T05:40:00.300Z\",\"waiting\":{\"block_id\":\"hold\",\"kind\":\"signal\",\"signal\":\"go\"}}\n\n",
			"id: 5.2\nevent: run.status\ndata: {\"runId\":\"run_1\",\"seq\":5,\"status\":\"running\",\"statusAt\":\"2026-11-22T05:41:00.000Z\"}\n\n",
			evCompleted)
	}
	f.on("GET /api/runs/run_1", 200, runCompleted)
	r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow", "-o", "table")
	require.Equal(t, 0, r.code, r)
	got := stamps(t, r.stdout)
	local := func(ts string) string {
		at, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err)
		return at.Local().Format("15:04:05.000")
	}
	require.Equal(t, []string{
		local("2026-11-22T05:40:00.100Z"), local("2026-11-22T05:40:00.200Z"), local("2026-11-22T05:40:00.200Z"),
		local("2026-11-22T05:40:00.250Z"), local("2026-11-22T05:40:00.300Z"), local("2026-11-22T05:41:00.000Z"),
	}, got, r.stdout)
	require.Contains(t, r.stdout, "run queued")
}

// TestPollPrintsAttemptsBeforeTheStatus: without the event stream, follow polls; a status has
// no time of its own there and is printed at the time it is read, after the attempts read with
// it (all of them at once on a run under way), so the lines stay in time order.
func TestPollPrintsAttemptsBeforeTheStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	f.on("GET /api/runs/run_1/events", 404, `{"error":"not_found","message":"no route"}`)
	f.routes["GET /api/runs/run_1"] = waitingThen(runCompleted)
	f.routes["GET /api/runs/run_1/logs"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("after") == "" {
			_, _ = io.WriteString(w, `{"items":[{"id":"att_1","block_id":"start","type":"trigger.manual","attempt":1,"status":"succeeded","startedAt":"2026-11-22T05:40:00.200Z"},`+
				`{"id":"att_2","block_id":"hold","type":"wait","attempt":1,"status":"running","startedAt":"2026-11-22T05:40:00.300Z"}],"nextCursor":"c1"}`)
			return
		}
		_, _ = io.WriteString(w, `{"items":[],"nextCursor":"c1"}`)
	}
	r := b.runAgainst(t, f, "runs", "logs", "run_1", "--follow", "-o", "table")
	require.Equal(t, 0, r.code, r)
	got := stamps(t, r.stdout)
	require.Len(t, got, 3, r.stdout)
	require.True(t, slices.IsSorted(got[:2]), "the attempts in order: %s", r.stdout)
	require.Contains(t, strings.Split(r.stdout, "\n")[2], `run waiting: signal "go" at hold`, "the status last: %s", r.stdout)
}

// waitingThen answers GET /api/runs/run_1: the run waiting for the signal "go" at hold the first
// time, then final.
func waitingThen(final string) http.HandlerFunc {
	var (
		mu    sync.Mutex
		polls int
	)
	return func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		polls++
		n := polls
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			_, _ = io.WriteString(w, `{"runId":"run_1","status":"waiting","waiting":{"block_id":"hold","kind":"signal","signal":"go"}}`)
			return
		}
		_, _ = io.WriteString(w, final)
	}
}
