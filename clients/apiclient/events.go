package apiclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Event is one Server-Sent Event of a run's stream (orchestrator README, "Run events,
// streamed"): Kind is its `event:` field (run.status, attempt.started, attempt.finished), ID
// its `id:` (the cursor Last-Event-ID resumes after) and Data its JSON `data:`.
type Event struct {
	ID   string
	Kind string
	Data []byte
}

// ErrNoEventStream is an API that does not stream a run's events: the route answered 404,
// 405 or 429 (too many open streams), or answered something other than text/event-stream.
// The caller falls back to polling.
var ErrNoEventStream = errors.New("the API does not stream run events")

// Stream timeouts. The server sends a heartbeat comment every 15 s while idle, so a
// connection silent for streamIdleTimeout is dead even if TCP has not noticed.
const (
	streamHeaderTimeout = 30 * time.Second
	streamIdleTimeout   = 60 * time.Second
)

// RunEvents opens GET /api/runs/:runId/events, resuming after lastEventID ("" from the
// start), and calls eventFunc with each event until the server ends the stream (nil), the
// connection drops or stays silent (a *TransportError: reconnect with the last ID seen),
// eventFunc fails (its error), or the API refuses (an *Error, or ErrNoEventStream).
func (c *Client) RunEvents(ctx context.Context, key, runID, lastEventID string, eventFunc func(Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := *c.base
	u.Path = c.base.Path + join("/api/runs/", runID, "/events")
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	hr.Header.Set("Accept", "text/event-stream")
	hr.Header.Set("Cache-Control", "no-cache")
	hr.Header.Set("Origin", c.origin)
	if c.userAgent != "" {
		hr.Header.Set("User-Agent", c.userAgent)
	}
	c.setAuth(hr.Header, c.domainAuth(key))
	if lastEventID != "" {
		hr.Header.Set("Last-Event-ID", lastEventID)
	}

	// The client's own Timeout bounds a whole exchange, which would cut a long stream: the
	// stream is bounded by the watchdog instead (headers, then silence between lines).
	hc := *c.http
	hc.Timeout = 0
	var silent atomic.Bool
	watchdog := time.AfterFunc(streamHeaderTimeout, func() { silent.Store(true); cancel() })
	defer watchdog.Stop()
	dropped := func(err error) error {
		if silent.Load() {
			err = fmt.Errorf("the stream stayed silent: %w", err)
		}
		return &TransportError{Method: http.MethodGet, URL: u.String(), Err: err}
	}

	resp, err := hc.Do(hr)
	if err != nil {
		return dropped(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed,
		resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w (HTTP %d)", ErrNoEventStream, resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return toError(&response{status: resp.StatusCode, header: resp.Header, body: b})
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("%w (Content-Type %q)", ErrNoEventStream, resp.Header.Get("Content-Type"))
	}

	r := NewEventReader(resp.Body)
	r.lineFunc = func() { watchdog.Reset(streamIdleTimeout) }
	watchdog.Reset(streamIdleTimeout)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return dropped(err)
		}
		if err := eventFunc(ev); err != nil {
			return err
		}
	}
}

// EventReader parses a text/event-stream body (the WHATWG "event stream interpretation"):
// `field: value` lines, comments (heartbeats) skipped, multi-line data joined with "\n", an
// event dispatched at a blank line when it has data.
type EventReader struct {
	r *bufio.Reader
	// lastID is the last `id:` seen: it carries over to later events, as the spec's last
	// event ID buffer does.
	lastID string
	// lineFunc, when set, is called for every line read (the idle watchdog).
	lineFunc func()
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next is the next event; io.EOF once the stream ended (an event not terminated by a blank
// line is dropped, as the spec says).
func (e *EventReader) Next() (Event, error) {
	var (
		kind    string
		data    strings.Builder
		hasData bool
	)
	for {
		line, err := e.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if e.lineFunc != nil {
			e.lineFunc()
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if !hasData {
				kind = ""
				continue
			}
			if kind == "" {
				kind = "message"
			}
			return Event{ID: e.lastID, Kind: kind, Data: []byte(data.String())}, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			kind = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				e.lastID = value
			}
		}
	}
}
