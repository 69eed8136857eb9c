package httpapi

// Server-Sent Events: GET /api/runs/:runId/events (one run, exact resume by Last-Event-ID) and
// GET /api/runs/events (one organization's runs' statuses, for lists; best effort).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/run-orchestrator/internal/app/query"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// StreamConfig paces the streams: a heartbeat comment every Heartbeat (proxies and clients
// keep an idle stream open), a re-read every Recheck even without a notification (one lost
// while the listener reconnected delays an event at most that long).
type StreamConfig struct {
	Heartbeat, Recheck time.Duration
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.Recheck <= 0 {
		c.Recheck = 5 * time.Second
	}
	return c
}

// eventData is an event's JSON (README "Run events, streamed").
type eventData struct {
	RunID      string           `json:"runId"`
	Seq        int64            `json:"seq"`
	WorkflowID string           `json:"workflowId,omitempty"`
	Status     string           `json:"status,omitempty"`
	Waiting    *waitingResponse `json:"waiting,omitempty"`
	Queue      *queueResponse   `json:"queue,omitempty"`
	Error      json.RawMessage  `json:"error,omitempty"`
	At         *wire.Time       `json:"at,omitempty"`       // a finished run's finish
	StatusAt   *wire.Time       `json:"statusAt,omitempty"` // when the run took the status
	// attempt events
	AttemptID   string     `json:"attemptId,omitempty"`
	BlockID     string     `json:"block_id,omitempty"`
	Type        string     `json:"type,omitempty"`
	Attempt     int        `json:"attempt,omitempty"`
	StartedAt   *wire.Time `json:"startedAt,omitempty"`
	FinishedAt  *wire.Time `json:"finishedAt,omitempty"`
	DurationMS  *int64     `json:"durationMs,omitempty"`
	OutputBytes *int       `json:"outputBytes,omitempty"`
	RetryAt     *wire.Time `json:"retry_at,omitempty"`
}

func stamp(t time.Time) *wire.Time {
	if t.IsZero() {
		return nil
	}
	w := wire.NewTime(t)
	return &w
}

// toEventData is the JSON of e.
func toEventData(e query.Event) eventData {
	if e.Kind == query.EventStatus {
		return toStatusData(*e.Run, e.Seq, e.At)
	}
	a := e.Try
	d := eventData{RunID: e.RunID, Seq: e.Seq, AttemptID: a.ID, BlockID: a.BlockID, Type: a.Type, Attempt: a.Attempt,
		Status: a.Status, StartedAt: stamp(a.StartedAt)}
	if e.Kind == query.EventAttemptFinished {
		d.FinishedAt, d.RetryAt, d.Error = stamp(a.FinishedAt), stamp(a.RetryAt), a.Error
		n := a.OutputBytes
		d.OutputBytes = &n
		if !a.FinishedAt.IsZero() {
			ms := a.FinishedAt.Sub(a.StartedAt).Milliseconds()
			d.DurationMS = &ms
		}
	}
	return d
}

// toStatusData is a run.status event's JSON; statusAt is when the run took the status (zero:
// not known, as in the organization's stream).
func toStatusData(r run.Record, seq int64, statusAt time.Time) eventData {
	d := eventData{RunID: r.ID, Seq: seq, WorkflowID: r.WorkflowID, Status: string(r.Status), Error: r.Error,
		Waiting: toRunResponse(r, false).Waiting, Queue: toQueueResponse(r.Queue), At: stamp(r.FinishedAt),
		StatusAt: stamp(statusAt)}
	return d
}

// sse writes events on a flushed response with no write deadline.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	rc := http.NewResponseController(w)
	// The server's WriteTimeout would cut a long stream: this response has none.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: rc}
	_ = s.flush()
	return s
}

func (s *sse) flush() error { return s.rc.Flush() }

func (s *sse) event(id, kind string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", kind, b); err != nil {
		return err
	}
	return nil
}

func (s *sse) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.flush()
}

// runEvents streams one run's events from Last-Event-ID (header, or ?lastEventId= for
// clients that cannot set it) until the run's final status.
func (s server) runEvents(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["runId"]
	if !wire.ValidID(wire.Run, id) {
		return run.ErrNotFound
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	cur, err := query.ParseCursor(last)
	if err != nil {
		// Another organization's run answers 404 whatever else is wrong (existence is not told).
		if _, gerr := s.h.App.Queries.Runs.Get(r.Context(), org(r), id); gerr != nil {
			return gerr
		}
		return errs.Newf(errs.InvalidQuery, "%s", err.Error())
	}
	ev := s.h.App.Queries.RunEvents
	// Watch before the first read, so a change committed between the read and the wait wakes it.
	wake, stop := ev.Waker().WatchRun(id)
	defer stop()
	snap, err := ev.Snapshot(r.Context(), org(r), id, cur.Seq)
	if err != nil {
		return err
	}
	out := startSSE(w)
	cfg := s.stream.withDefaults()
	heartbeat, recheck := time.NewTicker(cfg.Heartbeat), time.NewTicker(cfg.Recheck)
	defer heartbeat.Stop()
	defer recheck.Stop()
	// While the run is queued for a worker, its place in the queue is read every queueEvery
	// and sent when it changed (one read of the queue a second, only for a queued run's
	// streams; a run taken within the first second sends none).
	queueTick := time.NewTicker(queueEvery)
	defer queueTick.Stop()
	var lastQueue string
	sendQueue := func() error {
		wait, err := s.h.App.Queries.Runs.WaitingForWorker(r.Context(), org(r), id)
		if err != nil || wait == nil {
			return nil //nolint:nilerr // best effort: the next status event says more
		}
		q := toQueueResponse(wait)
		if q.Message == lastQueue {
			return nil
		}
		lastQueue = q.Message
		if err := out.event("", query.EventQueue, queueEventData{RunID: id, Queue: q}); err != nil {
			return err
		}
		return out.flush()
	}
	for {
		var events []query.Event
		events, cur = query.Events(snap, cur)
		for _, e := range events {
			if err := out.event(e.ID, e.Kind, toEventData(e)); err != nil {
				return nil //nolint:nilerr // the client went away
			}
		}
		if len(events) > 0 {
			if out.flush() != nil {
				return nil
			}
		}
		if cur.Final() {
			return nil // the run's final event is sent: the stream ends
		}
		queued := snap.Run.Status == run.StatusQueued
		select {
		case <-r.Context().Done():
			return nil
		case <-heartbeat.C:
			if out.comment("heartbeat") != nil {
				return nil
			}
			continue
		case <-queueTick.C:
			if queued {
				if sendQueue() != nil {
					return nil
				}
			}
			continue
		case <-wake:
		case <-recheck.C:
		}
		snap, err = ev.Snapshot(r.Context(), org(r), id, cur.Seq)
		if err != nil {
			if r.Context().Err() == nil {
				s.log.WarnContext(r.Context(), "run events: read failed; the client resumes by Last-Event-ID", "run", id, "err", err)
			}
			return nil // headers are sent: end the stream, the client reconnects
		}
	}
}

// queueEvery is how often a stream of a queued run reads the run's place in the queue.
const queueEvery = time.Second

// queueEventData is a run.queue event's data: why the queued run waits for a worker.
type queueEventData struct {
	RunID string         `json:"runId"`
	Queue *queueResponse `json:"queue"`
}

// Catch-up pages of the organization's stream: at most orgPage runs a read, orgPages reads a
// Recheck (a pass longer than that goes on at the next one).
const (
	orgPage  = 200
	orgPages = 5
)

// orgEvents streams run.status events of the organization's runs as they change, filtered by
// workflowId and status. Best effort: no ids, no resume (a list reloads, then follows). A
// notification wakes it for the run named; every Recheck it also reads the runs whose status
// changed since its last read (query.CatchUp), so a lost notification delays an event by at most
// that.
func (s server) orgEvents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	workflowID, status := q.Get("workflowId"), run.Status(q.Get("status"))
	if status != "" && !status.Valid() {
		return errs.Newf(errs.InvalidQuery, "status must be one of queued, running, waiting, completed, failed, cancelled")
	}
	if len(workflowID) > 200 {
		return errs.Newf(errs.InvalidQuery, "workflowId must be at most 200 characters")
	}
	o := org(r)
	changed, stop := s.h.App.Queries.RunEvents.Waker().WatchOrg(o)
	defer stop()
	// Watch, then take the horizon: a change committed in between is read by the first pass.
	h, err := s.h.App.Queries.OrgStatuses.Horizon(r.Context())
	if err != nil {
		return err
	}
	catch := query.NewCatchUp(h)
	out := startSSE(w)
	cfg := s.stream.withDefaults()
	heartbeat, recheck := time.NewTicker(cfg.Heartbeat), time.NewTicker(cfg.Recheck)
	defer heartbeat.Stop()
	defer recheck.Stop()
	seen := orgSeen{}
	// offer sends rec's status unless it is the one last seen for the run or filtered out.
	offer := func(rec run.Record, at time.Time) error {
		if (workflowID != "" && rec.WorkflowID != workflowID) || !seen.see(rec, at) || (status != "" && rec.Status != status) {
			return nil
		}
		return out.event("", query.EventStatus, toStatusData(rec, 0, time.Time{}))
	}
	// catchUp sends every status change since the last catch-up; false ends the stream.
	catchUp := func() bool {
		for range orgPages {
			page, h, err := s.h.App.Queries.OrgStatuses.After(r.Context(), o, workflowID, catch.After(), orgPage)
			if err != nil {
				if r.Context().Err() == nil {
					s.log.WarnContext(r.Context(), "run status events: catch-up read failed; the client reconnects", "err", err)
				}
				return false // headers are sent: end the stream
			}
			for _, c := range page {
				if offer(c.Run, c.At) != nil {
					return false
				}
			}
			if len(page) > 0 && out.flush() != nil {
				return false
			}
			var done bool
			if catch, done = catch.Next(page, orgPage, h); done {
				seen.forget(catch.Floor())
				break
			}
		}
		return true
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-heartbeat.C:
			if out.comment("heartbeat") != nil {
				return nil
			}
		case id := <-changed:
			notified := time.Now()
			if id == "" { // a catch-up was asked for: read as the re-check does
				if !catchUp() {
					return nil
				}
				continue
			}
			// Its status only: a notified run is read without its input and output.
			rec, err := s.h.App.Queries.OrgStatuses.Run(r.Context(), o, id, notified)
			if err != nil {
				if errors.Is(err, run.ErrNotFound) || errors.Is(err, context.Canceled) {
					continue
				}
				return nil // headers are sent: end the stream, the client reconnects
			}
			// A terminal status's time is the run's finish (the same commit set both).
			if offer(rec, rec.FinishedAt) != nil || out.flush() != nil {
				return nil
			}
		case <-recheck.C:
			if !catchUp() {
				return nil
			}
		}
	}
}

// orgSeen is the last status the organization's stream saw of each run (sent, or filtered out
// by status), with when the run took it when known.
type orgSeen map[string]seenStatus

type seenStatus struct {
	status run.Status
	at     time.Time
}

// see records rec's status; false when it is the one last seen.
func (m orgSeen) see(rec run.Record, at time.Time) bool {
	if s, ok := m[rec.ID]; ok && s.status == rec.Status {
		return false
	}
	m[rec.ID] = seenStatus{status: rec.Status, at: at}
	return true
}

// forget drops the terminal statuses taken before floor: a terminal status never changes and
// the catch-up reads nothing before its floor again, so no read brings them back. (Others are
// kept: a running run's next change would otherwise send running again.)
func (m orgSeen) forget(floor time.Time) {
	for id, s := range m {
		if s.status.Terminal() && s.at.Before(floor) {
			delete(m, id)
		}
	}
}
