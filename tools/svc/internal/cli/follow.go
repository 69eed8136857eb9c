package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	api "svc.dev/clients/apiclient"
)

// Following a run's event stream: a dropped connection is reopened with Last-Event-ID after a
// growing pause; a stream that never delivered an event after streamFallbackAfter tries is
// given up for polling (a proxy that cannot stream), one that did is retried up to
// streamMaxReconnects times in a row before follow fails.
const (
	streamFallbackAfter = 3
	streamMaxReconnects = 10
	reconnectMinPause   = 200 * time.Millisecond
	reconnectMaxPause   = 5 * time.Second
)

// follow prints the run's events as they happen until the run ends, then the run (see
// eventRenderer for the forms). It reads GET /api/runs/:id/events and falls back to polling
// the run and its logs (poll) when the API has no stream. A run that did not complete is an
// *ExitError.
func (a *app) follow(ctx context.Context, c *api.Client, key, runID string) error {
	rd := &eventRenderer{w: a.out(), json: a.jsonOutput(), now: a.env.Now, runID: runID}
	var (
		last     string // the last event id: where a reconnect resumes
		final    bool
		failures int
		pause    = reconnectMinPause
	)
	for {
		err := c.RunEvents(ctx, key, runID, last, func(ev api.Event) error {
			failures, pause = 0, reconnectMinPause
			if ev.ID != "" {
				last = ev.ID
			}
			status, err := rd.render(ev)
			if err != nil {
				return err
			}
			final = final || terminalStatus(status)
			return nil
		})
		if final {
			break // the stream ends after the final status; what follows it does not matter
		}
		var apiErr *api.Error
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, api.ErrNoEventStream) && last == "":
			fmt.Fprintf(a.env.Stderr, "svc: %v; following by polling\n", err)
			return a.poll(ctx, c, key, runID, rd)
		case errors.As(err, &apiErr):
			return err // the run's 404, a bad key: reconnecting would answer the same
		case err != nil && !isTransport(err) && !errors.Is(err, api.ErrNoEventStream):
			return err // printing failed
		}
		// A clean end before the final status (a replica going away) or a dropped connection.
		failures++
		if last == "" && failures >= streamFallbackAfter {
			fmt.Fprintf(a.env.Stderr, "svc: the event stream cannot be read (%v); following by polling\n", errOr(err, "it ended at once"))
			return a.poll(ctx, c, key, runID, rd)
		}
		if failures > streamMaxReconnects {
			return fmt.Errorf("follow run %s: the event stream dropped %d times in a row: %w", runID, failures, errOr(err, "ended early"))
		}
		if err := a.env.Sleep(ctx, pause); err != nil {
			return err
		}
		pause = min(pause*2, reconnectMaxPause)
	}
	raw, r, err := readRun(ctx, c, key, runID)
	if err != nil {
		return err
	}
	return a.finish(raw, r)
}

// readRun reads a run, as the API sends it and as the CLI reads it.
func readRun(ctx context.Context, c *api.Client, key, runID string) (json.RawMessage, runView, error) {
	var r runView
	raw, err := c.GetRun(ctx, key, runID, false)
	if err != nil {
		return nil, r, err
	}
	return raw, r, json.Unmarshal(raw, &r)
}

func isTransport(err error) bool {
	var te *api.TransportError
	return errors.As(err, &te)
}

func errOr(err error, msg string) error {
	if err == nil {
		return errors.New(msg)
	}
	return err
}

func terminalStatus(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// eventRenderer prints a run's events. JSON form (stdout not a terminal, or -o json): one
// object per line, the event's data with its kind and id first:
// {"event":"attempt.finished","id":"5.2",...}. Human form: one line per event, an attempt's as
// printAttempt prints it plus its retry, the run's statuses in words (what it waits for); the
// final status is left to finish, which prints the run.
type eventRenderer struct {
	w     io.Writer
	json  bool
	now   func() time.Time
	runID string
}

// eventData is the union of the three events' data (orchestrator README, "Run events,
// streamed").
type eventData struct {
	RunID      string `json:"runId"`
	Status     string `json:"status"`
	BlockID    string `json:"block_id"`
	Type       string `json:"type"`
	Attempt    int    `json:"attempt"`
	StartedAt  string `json:"startedAt"`
	FinishedAt string `json:"finishedAt"`
	DurationMs *int64 `json:"durationMs"`
	At         string `json:"at"`
	StatusAt   string `json:"statusAt"`
	RetryAt    string `json:"retry_at"`
	Error      *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
		BlockID string `json:"block_id"`
	} `json:"error"`
	OutputBytes *int64 `json:"outputBytes"`
	Queue       *struct {
		Message string `json:"message"`
	} `json:"queue"`
	Waiting *struct {
		BlockID string `json:"block_id"`
		Kind    string `json:"kind"`
		Until   string `json:"until"`
		Signal  string `json:"signal"`
	} `json:"waiting"`
}

// render prints ev and returns the run's status when ev is a run.status event.
func (rd *eventRenderer) render(ev api.Event) (string, error) {
	var d eventData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return "", fmt.Errorf("event %s %s: %w", ev.Kind, ev.ID, err)
	}
	status := ""
	if ev.Kind == "run.status" {
		status = d.Status
	}
	if rd.json {
		return status, rd.jsonLine(ev)
	}
	line := rd.humanLine(ev.Kind, d)
	if line == "" {
		return status, nil
	}
	_, err := fmt.Fprintln(rd.w, strings.TrimRight(line, " "))
	return status, err
}

func (rd *eventRenderer) jsonLine(ev api.Event) error {
	var data bytes.Buffer
	if err := json.Compact(&data, ev.Data); err != nil || data.Len() < 2 || data.Bytes()[0] != '{' {
		return fmt.Errorf("event %s %s: data is not a JSON object", ev.Kind, ev.ID)
	}
	head, err := json.Marshal(struct {
		Event string `json:"event"`
		ID    string `json:"id,omitempty"`
	}{ev.Kind, ev.ID})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	if data.Len() > 2 {
		b.WriteByte(',')
		b.Write(data.Bytes()[1:])
	} else {
		b.WriteByte('}')
	}
	b.WriteByte('\n')
	_, err = rd.w.Write(b.Bytes())
	return err
}

func (rd *eventRenderer) humanLine(kind string, d eventData) string {
	switch kind {
	case "attempt.started", "attempt.finished":
		stamp := d.StartedAt
		if kind == "attempt.finished" && d.FinishedAt != "" {
			stamp = d.FinishedAt
		}
		dur := ""
		if d.DurationMs != nil {
			dur = strconv.FormatInt(*d.DurationMs, 10) + "ms"
		}
		detail := ""
		switch {
		case d.Status == "lost":
			detail = "lost: its worker stopped answering"
			if d.Error != nil && d.Error.Message != "" {
				detail = "lost: " + d.Error.Message
			}
		case d.Error != nil:
			detail = "error: " + d.Error.Message
			if d.Error.Code != "" {
				detail = "error " + d.Error.Code + ": " + d.Error.Message
			}
		case d.Status == "succeeded" && d.OutputBytes != nil:
			detail = "output " + strconv.FormatInt(*d.OutputBytes, 10) + " B"
		}
		if d.RetryAt != "" {
			detail += "; retrying at " + rd.at(d.RetryAt)
		}
		return fmt.Sprintf("%s  %-24s %-14s %-9s %7s  %s", clock(stamp), d.BlockID+"#"+strconv.Itoa(d.Attempt), d.Type, d.Status, dur, detail)
	case "run.status":
		// When the run took the status: a replayed stream (opened on a run under way, or
		// resumed) sends its events at once, so the time it is printed would come after the
		// attempts that followed it. An API that does not say is read live, at best.
		at := cmp(d.StatusAt, d.At)
		stamp := clock(at)
		if at == "" {
			stamp = rd.now().Local().Format("15:04:05.000")
		}
		switch d.Status {
		case "completed", "failed", "cancelled":
			return "" // finish prints the ended run
		case "queued":
			return stamp + "  run queued: waiting for a worker to start it"
		case "waiting":
			return stamp + "  run waiting: " + rd.waitingFor(d)
		default:
			return stamp + "  run " + d.Status
		}
	}
	if kind == "run.queue" && d.Queue != nil && d.Queue.Message != "" {
		return rd.now().Local().Format("15:04:05.000") + "  run queued: " + d.Queue.Message
	}
	return "" // an event kind this CLI does not know yet
}

// waitingFor says what a waiting run waits for and, for a signal, how to send it.
func (rd *eventRenderer) waitingFor(d eventData) string {
	w := d.Waiting
	if w == nil {
		return "(the API did not say for what)"
	}
	switch w.Kind {
	case "sleep":
		return fmt.Sprintf("sleep at %s, until %s", w.BlockID, rd.at(w.Until))
	case "signal":
		s := fmt.Sprintf("signal %q at %s", w.Signal, w.BlockID)
		if w.Until != "" {
			s += ", times out at " + rd.at(w.Until)
		}
		return s + fmt.Sprintf(" (send it: svc runs signal %s --name %s)", cmp(d.RunID, rd.runID), shellWord(w.Signal))
	}
	return w.Kind + " at " + w.BlockID
}

// at is a future instant as local time and how far off it is: "15:04:05.300 (in 1.2s)".
func (rd *eventRenderer) at(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	s := t.Local().Format("15:04:05.000")
	if t.YearDay() != rd.now().YearDay() || t.Year() != rd.now().Year() {
		s = t.Local().Format("2006-01-02 15:04:05")
	}
	if d := t.Sub(rd.now()); d > 0 {
		s += " (in " + roundDuration(d).String() + ")"
	}
	return s
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(100 * time.Millisecond)
	}
}

// clock is a contract timestamp as a local time of day.
func clock(ts string) string {
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		return t.Local().Format("15:04:05.000")
	}
	return "--:--:--.---"
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@", r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
