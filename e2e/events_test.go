package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Kind string
	Data     map[string]any
}

// sseStream is an open event stream through the gateway.
type sseStream struct {
	Status int
	Body   string // the JSON error when Status is not 200
	Events <-chan sseEvent
	// Heartbeats counts heartbeat comments.
	mu         sync.Mutex
	heartbeats int
}

// openEvents opens path through the gateway as c, resuming after last ("": from the start).
// Cancel ctx to drop the connection.
func openEvents(t *testing.T, ctx context.Context, c *client, path, last string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.apiKey != "" {
		req.Header.Set("X-Api-Key", c.apiKey)
	}
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	out := make(chan sseEvent, 100)
	s := &sseStream{Status: resp.StatusCode, Events: out}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.Body = string(raw)
		close(out)
		return s
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
			case strings.HasPrefix(line, ":"):
				s.mu.Lock()
				s.heartbeats++
				s.mu.Unlock()
			case strings.HasPrefix(line, "id: "):
				e.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				e.Kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.Data)
			}
		}
	}()
	return s
}

// next is the stream's next event, or false once it ended; the test fails after 20 s.
func (s *sseStream) next(t *testing.T) (sseEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-s.Events:
		return e, ok
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s")
		return sseEvent{}, false
	}
}

func eventLine(e sseEvent) string {
	switch e.Kind {
	case "run.status":
		s := "status " + fmt.Sprint(e.Data["status"])
		if w, ok := e.Data["waiting"].(map[string]any); ok {
			s += " " + fmt.Sprint(w["kind"])
		}
		return s
	case "attempt.finished":
		s := e.Kind + " " + fmt.Sprint(e.Data["block_id"]) + " " + fmt.Sprint(e.Data["status"])
		if _, ok := e.Data["retry_at"]; ok {
			s += " retry"
		}
		return s
	default:
		return e.Kind + " " + fmt.Sprint(e.Data["block_id"])
	}
}

// TestRunEvents (issue 15, item 1) through the gateway: a run's stream says every attempt of a
// run with a retry, a sleep and a signal wait, and its statuses, in order, and ends after the
// final status; a client dropped mid-run resumes with Last-Event-ID losing and repeating
// nothing; 200 streams at once on one gateway; the organization's stream; 404 for another
// organization's run; 429 past the per-principal cap on open streams.
func TestRunEvents(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{
		"SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_GATEWAY_MAX_STREAMS": "250",
		"SVC_ORCHESTRATOR_EVENTS_HEARTBEAT": "200ms",
	})
	u := newRunsUser(t, sys, "events")
	story := u.workflow("story", wfDef(
		wfBlocks(wfTrigger(nil),
			wfBlock("flaky", "fail", map[string]any{"message": "first try fails", "fail_attempts": 1}),
			wfBlock("nap", "wait", map[string]any{"duration": "300ms"}),
			wfBlock("hold", "wait", map[string]any{"signal": "go", "timeout": "1h"}),
			wfBlock("after", "log", map[string]any{"message": "done"})),
		wfEdge("start", "flaky"), wfEdge("flaky", "nap"), wfEdge("nap", "hold"), wfEdge("hold", "after")))
	// Every event of the run, statuses included, in the run's order.
	want := []string{
		"status queued", "attempt.started start", "status running", "attempt.finished start succeeded",
		"attempt.started flaky", "attempt.finished flaky failed retry",
		"attempt.started flaky", "attempt.finished flaky succeeded",
		"attempt.started nap", "status waiting sleep", "attempt.finished nap succeeded", "status running",
		"attempt.started hold", "status waiting signal", "attempt.finished hold succeeded", "status running",
		"attempt.started after", "attempt.finished after succeeded", "status completed",
	}

	t.Run("EveryEventInOrderAndResume", func(t *testing.T) {
		t.Parallel()
		begin := time.Now()
		id := u.startRun(story, map[string]any{"input": map[string]any{"n": 1}})
		ctx, drop := context.WithCancel(t.Context())
		s := openEvents(t, ctx, u.c, "/api/runs/"+id+"/events", "")
		require.Equal(t, http.StatusOK, s.Status, s.Body)
		var got []sseEvent
		for {
			e, ok := s.next(t)
			require.True(t, ok, "the stream ended before the run did: %v", got)
			require.Equal(t, id, e.Data["runId"])
			got = append(got, e)
			if eventLine(e) == "status waiting signal" {
				w := e.Data["waiting"].(map[string]any)
				require.Equal(t, "go", w["signal"])
				require.NotEmpty(t, w["until"], "a signal wait says its timeout")
				break
			}
		}
		drop() // the connection is lost mid-run
		for range s.Events {
		}
		require.Equal(t, http.StatusAccepted, u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"}).Status)
		s = openEvents(t, t.Context(), u.c, "/api/runs/"+id+"/events", got[len(got)-1].ID)
		require.Equal(t, http.StatusOK, s.Status, s.Body)
		for e, ok := s.next(t); ok; e, ok = s.next(t) {
			got = append(got, e)
		}
		ids := map[string]bool{}
		var lines []string
		for _, e := range got {
			require.NotEmpty(t, e.ID)
			require.False(t, ids[e.ID], "event %s repeated", e.ID)
			ids[e.ID] = true
			lines = append(lines, eventLine(e))
		}
		require.Equal(t, want, lines, "every event, once, in order, across the reconnect")
		t.Logf("run with a retry, a sleep and a signal streamed in %s; %d events", time.Since(begin), len(got))

		// The same events from the start once the run is over.
		s = openEvents(t, t.Context(), u.c, "/api/runs/"+id+"/events", "")
		var again []string
		for e, ok := s.next(t); ok; e, ok = s.next(t) {
			again = append(again, eventLine(e))
		}
		require.Equal(t, want, again)
	})

	t.Run("ForeignRunIs404AndBadInputIs400", func(t *testing.T) {
		t.Parallel()
		id := u.startRun(story, nil)
		other := newRunsUser(t, sys, "events-other")
		s := openEvents(t, t.Context(), other.c, "/api/runs/"+id+"/events", "")
		require.Equal(t, http.StatusNotFound, s.Status, s.Body)
		missing := openEvents(t, t.Context(), other.c, "/api/runs/run_01JAAAAAAAAAAAAAAAAAAAAAAA/events", "")
		require.Equal(t, http.StatusNotFound, missing.Status)
		require.JSONEq(t, s.Body, missing.Body, "another organization's run answers exactly as a missing one")
		bad := openEvents(t, t.Context(), u.c, "/api/runs/"+id+"/events", "nope")
		require.Equal(t, http.StatusBadRequest, bad.Status, bad.Body)
		require.Contains(t, bad.Body, "invalid_query")
		anon := openEvents(t, t.Context(), newClient(t, sys), "/api/runs/"+id+"/events", "")
		require.Equal(t, http.StatusUnauthorized, anon.Status)
		require.Equal(t, http.StatusAccepted, u.c.post("/api/runs/"+id+"/cancel", nil).Status)
	})

	t.Run("OrganizationStream", func(t *testing.T) {
		t.Parallel()
		org := newRunsUser(t, sys, "events-org")
		wf := org.workflow("hold", wfDef(wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})), wfEdge("start", "hold")))
		s := openEvents(t, t.Context(), org.c, "/api/runs/events?workflowId="+wf, "")
		require.Equal(t, http.StatusOK, s.Status, s.Body)
		u.startRun(story, nil) // another organization's run is not in it
		id := org.startRun(wf, nil)
		seen := map[string]bool{}
		for !seen["waiting"] {
			e, ok := s.next(t)
			require.True(t, ok)
			require.Equal(t, "run.status", e.Kind)
			require.Equal(t, id, e.Data["runId"])
			seen[fmt.Sprint(e.Data["status"])] = true
		}
		require.Equal(t, http.StatusAccepted, org.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"}).Status)
		for !seen["completed"] {
			e, ok := s.next(t)
			require.True(t, ok)
			require.Equal(t, id, e.Data["runId"])
			seen[fmt.Sprint(e.Data["status"])] = true
		}
		bad := openEvents(t, t.Context(), org.c, "/api/runs/events?status=nope", "")
		require.Equal(t, http.StatusBadRequest, bad.Status, bad.Body)
	})

	t.Run("TwoHundredStreamsOnOneGateway", func(t *testing.T) {
		t.Parallel()
		many := newRunsUser(t, sys, "events-many")
		wf := many.workflow("hold", wfDef(wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})), wfEdge("start", "hold")))
		const n = 200
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = many.startRun(wf, nil)
		}
		begin := time.Now()
		streams := make([]*sseStream, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { streams[i] = openEvents(t, t.Context(), many.c, "/api/runs/"+ids[i%len(ids)]+"/events", "") })
		}
		wg.Wait()
		for _, s := range streams {
			require.Equal(t, http.StatusOK, s.Status, s.Body)
		}
		for _, id := range ids {
			many.pollRun(id, "waiting", func(r map[string]any) bool { return r["status"] == "waiting" })
			require.Equal(t, http.StatusAccepted, many.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"}).Status)
		}
		errsSeen := make([]error, n)
		for i, s := range streams {
			wg.Go(func() {
				var last string
				for e := range s.Events {
					last = eventLine(e)
				}
				if last != "status completed" {
					errsSeen[i] = fmt.Errorf("stream %d ended on %q", i, last)
				}
			})
		}
		wg.Wait()
		for _, err := range errsSeen {
			require.NoError(t, err)
		}
		t.Logf("%d streams opened, followed to their runs' end and closed in %s", n, time.Since(begin))
	})
}

// TestRunEventsStreamCap: a principal holds at most SVC_GATEWAY_MAX_STREAMS streams open on a
// gateway (429 rate_limited past it, a slot freed when one closes); an idle stream gets
// heartbeat comments through the gateway as they are written.
func TestRunEventsStreamCap(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{
		"SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_GATEWAY_MAX_STREAMS": "3",
		"SVC_ORCHESTRATOR_EVENTS_HEARTBEAT": "100ms",
	})
	u := newRunsUser(t, sys, "events-cap")
	wf := u.workflow("hold", wfDef(wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})), wfEdge("start", "hold")))
	id := u.startRun(wf, nil)
	ctx, drop := context.WithCancel(t.Context())
	var open []*sseStream
	for range 3 {
		s := openEvents(t, ctx, u.c, "/api/runs/"+id+"/events", "")
		require.Equal(t, http.StatusOK, s.Status, s.Body)
		open = append(open, s)
	}
	over := openEvents(t, t.Context(), u.c, "/api/runs/events", "")
	require.Equal(t, http.StatusTooManyRequests, over.Status, over.Body)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(over.Body), &body))
	require.Equal(t, "rate_limited", body["error"])
	require.NotEmpty(t, body["message"])
	other := u.byAPIKey() // another principal of the organization has slots of its own
	s := openEvents(t, t.Context(), other.c, "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, s.Status, s.Body)

	deadline := time.Now().Add(10 * time.Second)
	for open[0].heartbeatsSeen() < 2 {
		require.True(t, time.Now().Before(deadline), "no heartbeat came through the gateway")
		time.Sleep(20 * time.Millisecond)
	}
	drop()
	for _, s := range open {
		for range s.Events {
		}
	}
	waitForStreamSlot(t, u.c, "/api/runs/"+id+"/events")
	require.Equal(t, http.StatusAccepted, u.c.post("/api/runs/"+id+"/cancel", nil).Status)
}

// waitForStreamSlot opens path until a stream slot is free (200: a closed stream gave its
// slot back), 429 meanwhile; it fails after 10 s.
func waitForStreamSlot(t *testing.T, c *client, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := openEvents(t, t.Context(), c, path, "")
		if s.Status == http.StatusOK {
			return
		}
		require.Equal(t, http.StatusTooManyRequests, s.Status)
		require.True(t, time.Now().Before(deadline), "closed streams never gave their slots back")
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *sseStream) heartbeatsSeen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeats
}

// TestRunEventsStreamCapAcrossGateways: the cap on a principal's open streams holds across
// gateway replicas (the slots are counted in Redis), and a stream closed on one gateway frees
// a slot on the other.
func TestRunEventsStreamCapAcrossGateways(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_GATEWAY_MAX_STREAMS": "2"})
	second := harness.FreeAddr(t)
	sys.Run(t, harness.Gateway, map[string]string{"SVC_PUBLIC_ADDR": second, "SVC_GATEWAY_ADMIN_ADDR": harness.FreeAddr(t)})
	u := newRunsUser(t, sys, "events-cap-2").byAPIKey()
	wf := u.workflow("hold", wfDef(wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})), wfEdge("start", "hold")))
	id := u.startRun(wf, nil)
	viaSecond := u.c.with(func(c *client) { c.base = "http://" + second })

	ctx, drop := context.WithCancel(t.Context())
	one := openEvents(t, ctx, u.c, "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, one.Status, one.Body)
	two := openEvents(t, t.Context(), viaSecond, "/api/runs/"+id+"/events", "")
	require.Equal(t, http.StatusOK, two.Status, two.Body)
	for _, c := range []*client{u.c, viaSecond} {
		over := openEvents(t, t.Context(), c, "/api/runs/events", "")
		require.Equal(t, http.StatusTooManyRequests, over.Status, "a third stream on either gateway: %s", over.Body)
	}
	drop() // the stream on the first gateway closes: the second gateway has a slot again
	for range one.Events {
	}
	waitForStreamSlot(t, viaSecond, "/api/runs/events")
	require.Equal(t, http.StatusAccepted, u.c.post("/api/runs/"+id+"/cancel", nil).Status)
}

// TestRunEventsStreamCeilings (issue 21): fresh API keys do not multiply a user's open
// streams: the keys a user creates count for that user (identity resolves a key to its
// creator), and past SVC_GATEWAY_MAX_STREAMS_PER_USER the next stream is 429 rate_limited
// like one past the principal's cap, whichever key opens it.
func TestRunEventsStreamCeilings(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{
		"SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_GATEWAY_MAX_STREAMS": "2", "SVC_GATEWAY_MAX_STREAMS_PER_USER": "3",
	})
	u := newRunsUser(t, sys, "events-ceil")
	wf := u.workflow("hold", wfDef(wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})), wfEdge("start", "hold")))
	id := u.startRun(wf, nil)
	ctx, drop := context.WithCancel(t.Context())
	var open []*sseStream
	for _, c := range []*client{u.c, u.c, u.byAPIKey().c} {
		s := openEvents(t, ctx, c, "/api/runs/"+id+"/events", "")
		require.Equal(t, http.StatusOK, s.Status, s.Body)
		open = append(open, s)
	}
	fresh := u.byAPIKey().c
	over := openEvents(t, t.Context(), fresh, "/api/runs/events", "")
	require.Equal(t, http.StatusTooManyRequests, over.Status, "a fresh key of the same user: %s", over.Body)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(over.Body), &body))
	require.Equal(t, "rate_limited", body["error"])
	require.InDelta(t, 3, body["maxStreams"], 0)
	require.Contains(t, body["message"], "for this user")

	drop()
	for _, s := range open {
		for range s.Events {
		}
	}
	waitForStreamSlot(t, fresh, "/api/runs/events")
	require.Equal(t, http.StatusAccepted, u.c.post("/api/runs/"+id+"/cancel", nil).Status)
}
