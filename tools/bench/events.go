package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ---- event-latency -----------------------------------------------------------------------

// eventLatency measures how long a run's attempt events take from their commit to a client of
// the event stream (target: p99 ≤ 50 ms at 100 runs/s). Runs of trigger.manual → wait 100ms
// → log → wait 100ms → log are started open loop at the scenario's rate (100/s by default)
// for the warm-up and -duration; right after each 202 a client opens
// GET /api/runs/:id/events through the gateway with the scenario's API key and reads it to the
// run's final run.status. For every attempt.started and attempt.finished it reads, the latency
// is the client's receive time (when the event's closing blank line was read) − the attempt's
// startedAt / finishedAt in the event's data.
//
// The commit time itself is not exposed: startedAt and finishedAt are Postgres now() of the
// transaction that commits them, i.e. that transaction's start, truncated to the millisecond,
// so each value overstates commit → client by the transaction's duration and < 1 ms (an upper
// bound). Postgres, the services and bench run on this machine: one clock.
//
// Only events delivered live count: an event whose timestamp is before the stream's response
// headers arrived may have been committed before the stream's first read and sent from it
// (a replay, whose latency is the stream's opening, not the delivery); those are counted
// apart. The waits space a run's attempts out so that most of them commit while its stream is
// open. Runs whose 202 came during the warm-up are streamed but not recorded.
type eventLatency struct{}

func (eventLatency) Name() string         { return "event-latency" }
func (eventLatency) DefaultRate() float64 { return 100 }

const (
	eventLatencyTarget = 50 * time.Millisecond
	eventWaitFor       = 100 * time.Millisecond
	eventStreamLimit   = 30 * time.Second // a stream not at its final event by then failed
)

// sseEvent is one event of a Server-Sent Events stream and when its end was read.
type sseEvent struct {
	id, kind, data string
	at             time.Time
}

// readSSE reads the events of an SSE stream from r, calling fn with each one as soon as the blank
// line that ends it is read (now stamps it); comments are skipped. It returns at the end of the
// stream (nil) or on a read error, or when fn returns false (nil).
func readSSE(r io.Reader, now func() time.Time, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var (
		ev   sseEvent
		data []string
		has  bool
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if has {
				ev.data, ev.at = strings.Join(data, "\n"), now()
				if !fn(ev) {
					return nil
				}
			}
			ev, data, has = sseEvent{}, nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.kind, has = value, true
		case "data":
			data, has = append(data, value), true
		case "id":
			ev.id, has = value, true
		}
	}
	return sc.Err()
}

// streamData is the part of an event's data the scenario reads.
type streamData struct {
	Status     string  `json:"status"`
	StartedAt  *string `json:"startedAt"`
	FinishedAt *string `json:"finishedAt"`
}

// attemptStamp is the server timestamp of an attempt event: startedAt of attempt.started,
// finishedAt of attempt.finished. ok is false for other events.
func attemptStamp(e sseEvent) (t time.Time, ok bool, err error) {
	var field func(streamData) *string
	switch e.kind {
	case "attempt.started":
		field = func(d streamData) *string { return d.StartedAt }
	case "attempt.finished":
		field = func(d streamData) *string { return d.FinishedAt }
	default:
		return time.Time{}, false, nil
	}
	var d streamData
	if err := json.Unmarshal([]byte(e.data), &d); err != nil {
		return time.Time{}, false, fmt.Errorf("%s %s: decode: %w", e.kind, e.id, err)
	}
	t, ok = stamp(field(d))
	if !ok {
		return time.Time{}, false, fmt.Errorf("%s %s: no timestamp in %s", e.kind, e.id, clip(e.data, 200))
	}
	return t, true, nil
}

// streamResult is what one run's stream gave.
type streamResult struct {
	started, finished []time.Duration // live attempt events: receive time − server timestamp
	replayed          int             // attempt events committed perhaps before the stream opened
	final             string          // the run's final status, "" when the stream did not reach it
	err               error
}

// terminalStatus says a run status is final.
func terminalStatus(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// consume reads one run's stream, opened when its headers arrived at opened, to the run's final
// run.status.
func consume(body io.Reader, opened time.Time, now func() time.Time) streamResult {
	var res streamResult
	err := readSSE(body, now, func(e sseEvent) bool {
		if e.kind == "run.status" {
			var d streamData
			if err := json.Unmarshal([]byte(e.data), &d); err != nil {
				res.err = fmt.Errorf("run.status %s: decode: %w", e.id, err)
				return false
			}
			if terminalStatus(d.Status) {
				res.final = d.Status
				return false
			}
			return true
		}
		ts, ok, err := attemptStamp(e)
		switch {
		case err != nil:
			res.err = err
			return false
		case !ok:
			return true
		case ts.Before(opened):
			res.replayed++
		case e.kind == "attempt.started":
			res.started = append(res.started, e.at.Sub(ts))
		default:
			res.finished = append(res.finished, e.at.Sub(ts))
		}
		return true
	})
	if res.err == nil && err != nil {
		res.err = fmt.Errorf("read: %w", err)
	}
	if res.err == nil && res.final == "" {
		res.err = errors.New("stream ended before the run's final status")
	}
	return res
}

// followRun opens runID's event stream through the gateway with key and reads it to the end.
func followRun(ctx context.Context, client *http.Client, gateway, key, runID string) streamResult {
	ctx, cancel := context.WithTimeout(ctx, eventStreamLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gateway+"/api/runs/"+runID+"/events", nil)
	if err != nil {
		return streamResult{err: err}
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return streamResult{err: fmt.Errorf("run %s: %w", runID, err)}
	}
	defer resp.Body.Close()
	opened := time.Now()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return streamResult{err: fmt.Errorf("run %s: GET events: %d %s", runID, resp.StatusCode, clip(string(b), 200))}
	}
	res := consume(resp.Body, opened, time.Now)
	if res.err != nil {
		res.err = fmt.Errorf("run %s: %w", runID, res.err)
	}
	return res
}

// newStreamClient is a client for many long streams: no overall timeout (followRun bounds each
// stream), and enough idle connections that a new stream rarely dials.
func newStreamClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// eventTally sums the streams of the measured runs.
type eventTally struct {
	mu                sync.Mutex
	runs, completed   int
	started, finished []time.Duration
	replayed          int
	failed            int
	firstErr          string
}

func (t *eventTally) add(r streamResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs++
	t.started = append(t.started, r.started...)
	t.finished = append(t.finished, r.finished...)
	t.replayed += r.replayed
	switch {
	case r.err != nil:
		t.failed++
		if t.firstErr == "" {
			t.firstErr = r.err.Error()
		}
	case r.final == "completed":
		t.completed++
	}
}

// eventFinding is the note under the rows: the target, what was counted and the verdict.
func eventFinding(rate float64, post Stats, t *eventTally, all Stats) string {
	live := len(t.started) + len(t.finished)
	counts := fmt.Sprintf("%d runs measured (%d completed), %d streams failed, %d attempt events delivered live (%d started, %d finished), %d more excluded as committed perhaps before their stream opened",
		t.runs, t.completed, t.failed, live, len(t.started), len(t.finished), t.replayed)
	if errorsIn(post) || t.failed > 0 || t.completed < t.runs || live == 0 {
		return fmt.Sprintf("errors (%d POST errors; %s): target (issue 15: event latency p99 ≤ %d ms at 100 runs/s) not checked.",
			post.TransportErrors+post.StatusErrors, counts, eventLatencyTarget.Milliseconds())
	}
	return fmt.Sprintf("target (issue 15: attempt commit → SSE client p99 ≤ %d ms at 100 runs/s) at %.0f runs/s: p50 %s / p90 %s / p99 %s / max %s ms, %s; %s. "+
		"Latency = client receive time − the attempt's startedAt/finishedAt in the event, Postgres now() of the committing transaction (its start, truncated to the ms): an upper bound on commit → client; same machine, one clock.",
		eventLatencyTarget.Milliseconds(), rate, millis(all.P50), millis(all.P90), millis(all.P99), millis(all.Max),
		verdict(all.P99 <= eventLatencyTarget), counts)
}

func (s eventLatency) Run(ctx context.Context, env Env) ([]Result, error) {
	ops := linearOps(
		map[string]any{"type": "wait", "params": map[string]any{"duration": eventWaitFor.String()}},
		map[string]any{"type": "log", "params": map[string]any{"message": "one"}},
		map[string]any{"type": "wait", "params": map[string]any{"duration": eventWaitFor.String()}},
		map[string]any{"type": "log", "params": map[string]any{"message": "two"}},
	)
	_, acct, wf, cleanup, err := setupScenario(ctx, env, s.Name(), ops, 16)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	client := newStreamClient()
	defer client.CloseIdleConnections()
	var (
		tally   eventTally
		wg      sync.WaitGroup
		measure time.Time // 202s from then on are recorded
	)
	streamCtx, stopStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStreams()
	check := func(body []byte) error {
		var a startAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if a.RunID == "" {
			return fmt.Errorf("no runId in %s", clip(string(body), 200))
		}
		recorded := !time.Now().Before(measure)
		wg.Go(func() {
			r := followRun(streamCtx, client, env.GatewayURL, acct.key, a.RunID)
			if recorded {
				tally.add(r)
			}
		})
		return nil
	}
	env.Log("  POST /run (trigger → wait %s → log → wait %s → log) at %g/s, one event stream per run", eventWaitFor, eventWaitFor, env.Rate)
	measure = time.Now().Add(env.Warmup)
	st, err := env.Generator.Run(ctx, env.phase(runTarget(env, acct, wf, check)))
	if err != nil {
		stopStreams()
		wg.Wait()
		return nil, err
	}
	env.Log("  waiting for the streams to end")
	wg.Wait()
	all := durationStats(append(append([]time.Duration{}, tally.started...), tally.finished...), tally.failed, tally.firstErr)
	started := durationStats(tally.started, 0, "")
	finished := durationStats(tally.finished, 0, "")
	for _, x := range []*Stats{&all, &started, &finished} {
		x.TargetRate, x.AchievedRate = st.TargetRate, st.AchievedRate // the runs' rate: the values are latencies of events
	}
	return []Result{
		{Scenario: s.Name(), Phase: "POST /run via gateway (202)", Stats: st},
		{Scenario: s.Name(), Phase: "attempt.started: client receive − startedAt", Stats: started},
		{Scenario: s.Name(), Phase: "attempt.finished: client receive − finishedAt", Stats: finished},
		{Scenario: s.Name(), Phase: "all attempt events (n includes failed streams)", Stats: all, Note: eventFinding(env.Rate, st, &tally, all)},
	}, nil
}
