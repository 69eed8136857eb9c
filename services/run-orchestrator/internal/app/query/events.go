package query

// The run event stream (GET /api/runs/:id/events), derived from the database alone: the
// attempts and the run's status log, ordered by their change sequence, and the run's row. Any replica derives the same
// events from the same rows, so a client reconnecting with Last-Event-ID (to this replica or
// another) resumes exactly; notifications only say when to read again.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Event kinds of the stream.
const (
	EventStatus          = "run.status"
	EventAttemptStarted  = "attempt.started"
	EventAttemptFinished = "attempt.finished"
	// EventQueue says why a queued run waits for a worker (its place in the queue), sent when
	// it changes while the run is queued; it carries no id and is not replayed on resume.
	EventQueue = "run.queue"
)

// statusCodes number the statuses in a cursor (0: none sent yet).
var statusCodes = map[run.Status]int{ //nolint:gochecknoglobals // a constant table
	run.StatusQueued: 1, run.StatusRunning: 2, run.StatusWaiting: 3,
	run.StatusCompleted: 4, run.StatusFailed: 5, run.StatusCancelled: 6,
}

// Cursor is where a run's stream stands: the change sequence of the last event sent and the
// last status sent. An event's id is the cursor after it, "<seq>.<status code>": attempt
// events have sequences of their own, and a status event at a sequence differs from the
// previous event's status, so ids never repeat within a run.
type Cursor struct {
	Seq    int64
	Status run.Status
}

// ErrBadEventID is a Last-Event-ID this stream never issued.
var ErrBadEventID = errors.New("Last-Event-ID must be the id of an event of this stream")

// ParseCursor reads an event id ("" is the start).
func ParseCursor(id string) (Cursor, error) {
	if id == "" {
		return Cursor{}, nil
	}
	seqText, codeText, ok := strings.Cut(id, ".")
	seq, err1 := strconv.ParseInt(seqText, 10, 64)
	code, err2 := strconv.Atoi(codeText)
	if !ok || err1 != nil || err2 != nil || seq < 0 || code < 0 || code > len(statusCodes) {
		return Cursor{}, ErrBadEventID
	}
	c := Cursor{Seq: seq}
	for st, n := range statusCodes {
		if n == code {
			c.Status = st
		}
	}
	return c, nil
}

// ID is the cursor as an event id.
func (c Cursor) ID() string {
	return strconv.FormatInt(c.Seq, 10) + "." + strconv.Itoa(statusCodes[c.Status])
}

// Event is one event of a run's stream.
type Event struct {
	ID     string
	Kind   string
	RunID  string
	Seq    int64
	Status run.Status        // run.status
	Run    *run.Record       // run.status: the run at the event
	At     time.Time         // run.status: when the run took the status (zero: not known)
	Try    run.AttemptChange // attempt events
}

// Events derives the events after cursor c from a snapshot read with after = c.Seq, and the
// cursor after them, in sequence order: the run's queued status at sequence 0 (every run
// starts there) when nothing was sent yet; every attempt started after c (attempt.started at
// the sequence it started at); every attempt finished after c (attempt.finished at its latest
// sequence); every status of the run's status log after c, each with what the run waited for
// then. At one sequence (only a run migrated in flight has a status there) attempts come
// first. A run whose status is not in its log (none should be) gets its present status last.
// Each status says when the run took it (queued: when the run was created), so that a client
// shows the events of a replay, printed all at once, at the times they happened.
func Events(snap run.Snapshot, c Cursor) ([]Event, Cursor) {
	type at struct {
		seq int64
		ev  Event
	}
	var evs []at
	if c.Status == "" {
		evs = append(evs, at{0, Event{Kind: EventStatus, Status: run.StatusQueued, At: snap.Run.CreatedAt}})
	}
	for _, a := range snap.Attempts {
		if a.StartedSeq > c.Seq || (a.StartedSeq == 0 && a.Status == "running") {
			seq := a.StartedSeq
			if seq == 0 {
				seq = a.Seq
			}
			started := a
			started.Status, started.FinishedAt, started.RetryAt, started.Error, started.OutputBytes = "running", time.Time{}, time.Time{}, nil, 0
			evs = append(evs, at{seq, Event{Kind: EventAttemptStarted, Try: started}})
		}
		if a.Status != "running" && a.Seq > c.Seq {
			evs = append(evs, at{a.Seq, Event{Kind: EventAttemptFinished, Try: a}})
		}
	}
	for _, st := range snap.Statuses {
		if st.Seq > c.Seq || (st.Seq == c.Seq && st.Status != c.Status) {
			evs = append(evs, at{st.Seq, Event{Kind: EventStatus, Status: st.Status, Run: statusAt(snap.Run, st), At: st.At}})
		}
	}
	slices.SortStableFunc(evs, func(x, y at) int {
		if x.seq != y.seq {
			return cmp.Compare(x.seq, y.seq)
		}
		return cmp.Compare(statusLast(x.ev), statusLast(y.ev))
	})
	out := make([]Event, 0, len(evs)+1)
	for _, e := range evs {
		c.Seq = max(c.Seq, e.seq)
		if e.ev.Kind == EventStatus {
			c.Status = e.ev.Status
			if e.ev.Run == nil {
				e.ev.Run = statusAt(snap.Run, run.StatusChange{Status: e.ev.Status})
			}
		}
		e.ev.Seq, e.ev.RunID, e.ev.ID = e.seq, snap.Run.ID, c.ID()
		out = append(out, e.ev)
	}
	if snap.ChangeSeq > c.Seq {
		c.Seq = snap.ChangeSeq
	}
	if snap.Run.Status != c.Status {
		c.Status = snap.Run.Status
		rec := snap.Run
		out = append(out, Event{ID: c.ID(), Kind: EventStatus, RunID: rec.ID, Seq: c.Seq, Status: rec.Status, Run: &rec, At: rec.FinishedAt})
	}
	return out, c
}

// statusAt is the run as it was at status change st: the run's record with that status and
// wait; a finish's output and error belong to the final status only.
func statusAt(r run.Record, st run.StatusChange) *run.Record {
	r.Status, r.Waiting, r.Queue = st.Status, st.Waiting, st.Queue
	if !st.Status.Terminal() {
		r.Output, r.Error, r.FinishedAt = nil, nil, time.Time{}
	}
	return &r
}

// statusLast orders a status after the attempts' changes at the same sequence.
func statusLast(e Event) int {
	if e.Kind == EventStatus {
		return 1
	}
	return 0
}

// Final reports whether the cursor is past the run's last event.
func (c Cursor) Final() bool { return c.Status.Terminal() }

// RunEvents are the stream's reads: snapshots (a store that cannot be reached is an
// *port.UnavailableError) and the wake-ups.
type RunEvents struct {
	reader port.SnapshotReader
	waker  port.Waker
}

// NewRunEvents returns the stream's use cases over reader and waker.
func NewRunEvents(reader port.SnapshotReader, waker port.Waker) RunEvents {
	if reader == nil || waker == nil {
		panic("nil reader or waker")
	}
	return RunEvents{reader: reader, waker: waker}
}

// port.Snapshot reads the run id of org and its attempts changed after the sequence after.
func (e RunEvents) Snapshot(ctx context.Context, org, id string, after int64) (run.Snapshot, error) {
	s, err := e.reader.Snapshot(ctx, org, id, after)
	return s, port.StoreError(err)
}

// port.Waker says when to read again.
func (e RunEvents) Waker() port.Waker { return e.waker }
