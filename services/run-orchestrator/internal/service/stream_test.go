package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/services/run-orchestrator/internal/adapters/runnotify"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Kind string
	Data     map[string]any
}

// openStream opens path as org with Last-Event-ID last ("": from the start) and returns its
// events as they come; the channel is closed when the stream ends. Cancel ctx to drop it.
func (b *testBundle) openStream(t *testing.T, ctx context.Context, path, last string) (int, <-chan sseEvent) {
	t.Helper()
	ctx = internalauth.WithIdentity(ctx, internalauth.Identity{UserID: "usr_test", OrganizationID: b.org, AuthMode: internalauth.ModeSession})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.sys.url+path, nil)
	require.NoError(t, err)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	client := &http.Client{Transport: internalauth.Transport{Signer: b.sys.signer, Base: http.DefaultTransport, Now: time.Now}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	out := make(chan sseEvent, 100)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		close(out)
		return resp.StatusCode, out
	}
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.Kind != "" {
					out <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				e.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				e.Kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.Data)
			}
		}
	}()
	return resp.StatusCode, out
}

// next is the stream's next event, or false when it ended; it fails the test after 15 s.
func next(t *testing.T, events <-chan sseEvent) (sseEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-events:
		return e, ok
	case <-time.After(15 * time.Second):
		t.Fatal("no event within 15 s")
		return sseEvent{}, false
	}
}

func story(e sseEvent) string {
	switch e.Kind {
	case "run.status":
		s := "status " + e.Data["status"].(string)
		if w, ok := e.Data["waiting"].(map[string]any); ok {
			s += " " + w["kind"].(string)
		}
		return s
	case "attempt.finished":
		s := e.Kind + " " + e.Data["block_id"].(string) + " " + e.Data["status"].(string)
		if _, ok := e.Data["retry_at"]; ok {
			s += " retry"
		}
		return s
	default:
		return e.Kind + " " + e.Data["block_id"].(string)
	}
}

// TestRunEventStream: the stream of a run with a retry, a sleep and a signal wait says every
// attempt and status in order and ends after the final status; a client dropped while the run
// waits resumes with Last-Event-ID and loses and repeats nothing; a stream from the start of
// a finished run lists every attempt event once.
func TestRunEventStream(t *testing.T) {
	t.Parallel()
	sys := start(t)
	b := sys.setup(t)
	b.workflow(t, "wf_stream", 1, def([]string{manual,
		`{"block_id":"flaky","type":"fail","params":{"message":"first try fails","fail_attempts":1}}`,
		`{"block_id":"nap","type":"wait","params":{"duration":"200ms"}}`,
		`{"block_id":"hold","type":"wait","params":{"signal":"go","timeout":"1h"}}`,
		`{"block_id":"after","type":"log","params":{"message":"done"}}`,
	}, edge("start", "flaky"), edge("flaky", "nap"), edge("nap", "hold"), edge("hold", "after")))
	id := b.startRun(t, "wf_stream", map[string]any{"input": map[string]any{"n": 1}})

	ctx, drop := context.WithCancel(t.Context())
	status, events := b.openStream(t, ctx, "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, status)
	var got []sseEvent
	for {
		e, ok := next(t, events)
		require.True(t, ok, "the stream ended early: %v", got)
		got = append(got, e)
		if story(e) == "status waiting signal" {
			break
		}
	}
	drop() // the connection is lost while the run waits for its signal
	for range events {
	}
	r := b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go"})
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	status, events = b.openStream(t, t.Context(), "/api/runs/"+id+"/events", got[len(got)-1].ID)
	require.Equal(t, http.StatusOK, status)
	for e, ok := next(t, events); ok; e, ok = next(t, events) {
		got = append(got, e)
	}
	var lines []string
	seen := map[string]bool{}
	for _, e := range got {
		require.False(t, seen[e.ID], "event id %s repeated", e.ID)
		seen[e.ID] = true
		lines = append(lines, story(e))
	}
	want := []string{
		"status queued", "attempt.started start", "status running", "attempt.finished start succeeded",
		"attempt.started flaky", "attempt.finished flaky failed retry",
		"attempt.started flaky", "attempt.finished flaky succeeded",
		"attempt.started nap", "status waiting sleep", "attempt.finished nap succeeded", "status running",
		"attempt.started hold", "status waiting signal", "attempt.finished hold succeeded", "status running",
		"attempt.started after", "attempt.finished after succeeded", "status completed",
	}
	// Every status the run went through (from its status log, also those it left before the
	// stream read it) and every attempt, in order.
	require.Equal(t, want, lines)

	// From the start after the end: the same events again.
	status, events = b.openStream(t, t.Context(), "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, status)
	var again []string
	for e, ok := next(t, events); ok; e, ok = next(t, events) {
		again = append(again, story(e))
	}
	require.Equal(t, want, again)

	// Bad input is 400 or 404, never 500; another organization's run is 404.
	for _, last := range []string{"x", "1.99", "-1.0", "1"} {
		status, _ = b.openStream(t, t.Context(), "/api/runs/"+id+"/events", last)
		require.Equal(t, http.StatusBadRequest, status, last)
	}
	other := sys.setup(t)
	status, _ = other.openStream(t, t.Context(), "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.openStream(t, t.Context(), "/api/runs/run_nope/events", "")
	require.Equal(t, http.StatusNotFound, status)
}

// TestOrgEventStream: the organization's stream says its runs' statuses as they change,
// filtered by workflow, and nothing of another organization's.
func TestOrgEventStream(t *testing.T) {
	t.Parallel()
	sys := start(t)
	b := sys.setup(t)
	other := sys.setup(t)
	b.workflow(t, "wf_org", 1, def([]string{manual, `{"block_id":"hold","type":"wait","params":{"signal":"go"}}`}, edge("start", "hold")))
	other.workflow(t, "wf_org", 1, def([]string{manual, `{"block_id":"hold","type":"wait","params":{"signal":"go"}}`}, edge("start", "hold")))
	status, events := b.openStream(t, t.Context(), "/api/runs/events?workflowId=wf_org", "")
	require.Equal(t, http.StatusOK, status)
	status, _ = b.openStream(t, t.Context(), "/api/runs/events?status=nope", "")
	require.Equal(t, http.StatusBadRequest, status)
	other.startRun(t, "wf_org", nil)
	id := b.startRun(t, "wf_org", nil)
	for {
		e, ok := next(t, events)
		require.True(t, ok)
		require.Equal(t, id, e.Data["runId"], "only the organization's runs")
		if e.Data["status"] == "waiting" {
			break
		}
	}
	require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go"}).Status)
	for {
		e, ok := next(t, events)
		require.True(t, ok)
		require.Equal(t, id, e.Data["runId"])
		if e.Data["status"] == "completed" {
			return
		}
	}
}

// TestNotifierReachesListeners: a change published on one pool reaches a listener on another
// connection through Postgres NOTIFY, batched, for the run's and the organization's watchers.
func TestNotifierReachesListeners(t *testing.T) {
	t.Parallel()
	sys := start(t)
	pool, err := pgxpool.New(t.Context(), sys.dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	hub := runnotify.NewHub()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	l := runnotify.NewListener(pool, hub, slog.New(slog.DiscardHandler))
	go l.Run(ctx)
	select {
	case <-l.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never listened")
	}
	runWake, stopRun := hub.WatchRun("run_a")
	defer stopRun()
	orgWake, stopOrg := hub.WatchOrg("org_a")
	defer stopOrg()
	n := runnotify.NewNotifier(pool, nil, time.Millisecond, slog.New(slog.DiscardHandler))
	go n.Run(ctx)
	many := make([]run.Change, 0, 1000)
	for i := range 1000 { // more than one payload's worth
		many = append(many, run.Change{RunID: "run_" + strings.Repeat("x", 20) + string(rune('a'+i%26)) + time.Now().Format("150405.000000000"), OrganizationID: "org_b"})
	}
	n.Publish(many)
	n.Publish([]run.Change{{RunID: "run_a", OrganizationID: "org_a", Kind: run.ChangeStatus}})
	select {
	case <-runWake:
	case <-time.After(10 * time.Second):
		t.Fatal("the run's watcher was never woken")
	}
	select {
	case got := <-orgWake:
		require.Equal(t, "run_a", got)
	case <-time.After(10 * time.Second):
		t.Fatal("the organization's watcher was never woken")
	}
}
