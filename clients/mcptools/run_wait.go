package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	api "svc.dev/clients/apiclient"
)

// How runs_wait follows a run. It reads the run once, then follows its event stream
// (GET /api/runs/:id/events, one rate-limit token however long it lasts) and reads the run
// again when the stream says it has ended or settled in a wait. An API without the stream is
// polled, slowly enough that a long wait costs only a few requests a minute.
type waitTiming struct {
	// settle is how long the stream must stay quiet after a "waiting" status before the wait
	// is taken as the run's present state. A stream opened on a run sends every status the
	// run has had, in one burst: a wait the run has left is followed at once by the events
	// that ended it, while a wait under way is followed by silence.
	settle time.Duration
	// firstEvent bounds the wait for the first event of a stream read from the start (it
	// always begins with the queued status, sent at once). A stream that says nothing for
	// this long is held back by something that buffers it, and the run is polled instead.
	firstEvent time.Duration
	// maxDrops is how many times in a row the stream may drop (or end before the run did)
	// before the run is polled instead; reconnects wait reconnectMin, doubling up to
	// reconnectMax, and resume after the last event seen.
	maxDrops                   int
	reconnectMin, reconnectMax time.Duration
	// pollFirst and pollMax space the polls of an API that does not stream: the first poll
	// after pollFirst, each pause then doubling up to pollMax (5 s, 10 s, 20 s, 20 s...: at
	// most five reads in any minute).
	pollFirst, pollMax time.Duration
}

func defaultWaitTiming() waitTiming {
	return waitTiming{
		settle:       500 * time.Millisecond,
		firstEvent:   5 * time.Second,
		maxDrops:     5,
		reconnectMin: 200 * time.Millisecond,
		reconnectMax: 5 * time.Second,
		pollFirst:    5 * time.Second,
		pollMax:      20 * time.Second,
	}
}

// runWait is one runs_wait call.
type runWait struct {
	p      Principal
	runID  string
	timing waitTiming
	// skip is the timer wait the run was already in when the call began: it does not end the
	// call (nothing but time ends it, and answering at once would have an agent that calls
	// again to wait for the end spin until the timer fires).
	skip *api.Waiting
}

// errStreamStop ends a stream the wait no longer needs.
var errStreamStop = errors.New("stop reading the stream")

// waitForRun waits until the run has finished, waits for a signal, or has begun a timer wait
// since the call started, for at most d. ctx bounds the whole call (the client's request).
func (t *tools) waitForRun(ctx context.Context, p Principal, runID string, d time.Duration) (RunsWaitOutput, error) {
	ctx = clientContext{ctx}
	w := &runWait{p: p, runID: runID, timing: t.timing}
	r, err := t.getRun(ctx, p, runID)
	if err != nil {
		return RunsWaitOutput{}, err
	}
	if r.Status == "waiting" && r.Waiting != nil && r.Waiting.Kind == "sleep" {
		w.skip = r.Waiting
	}
	if w.ends(r) {
		return waitOutput(r, false), nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	r, done, err := w.follow(ctx, waitCtx, t)
	switch {
	case err != nil:
		return RunsWaitOutput{}, err
	case done:
		return waitOutput(r, false), nil
	}
	// The time is up: one last read says where the run is now.
	if ctx.Err() != nil {
		return RunsWaitOutput{}, toolError(ctx.Err())
	}
	r, err = t.getRun(ctx, p, runID)
	if err != nil {
		return RunsWaitOutput{}, err
	}
	return waitOutput(r, !w.ends(r)), nil
}

// ends says whether the run, as read, ends the call: finished, waiting for a signal, or in a
// timer wait other than the one under way when the call began.
func (w *runWait) ends(r api.Run) bool {
	if r.Terminal() {
		return true
	}
	if r.Status != "waiting" {
		return false
	}
	return w.skip == nil || r.Waiting == nil || !sameWait(*w.skip, *r.Waiting)
}

func sameWait(a, b api.Waiting) bool {
	return a.BlockID == b.BlockID && a.Kind == b.Kind && a.Until == b.Until && a.Signal == b.Signal
}

func waitOutput(r api.Run, timedOut bool) RunsWaitOutput {
	return RunsWaitOutput{Run: r, Finished: r.Terminal(), Waiting: r.Status == "waiting", TimedOut: timedOut}
}

// statusData is what the wait reads of a run.status event.
type statusData struct {
	Status  string       `json:"status"`
	Waiting *api.Waiting `json:"waiting"`
}

// follow reads the run's event stream until the run ends the call (done, with the run as
// read then), waitCtx ends (not done), or ctx ends or the API refuses (an error). It falls
// back to polling when the stream cannot be read.
func (w *runWait) follow(ctx, waitCtx context.Context, t *tools) (api.Run, bool, error) {
	var (
		last   string // the last event id: where a reconnect resumes
		settle *time.Timer
		drops  int
		pause  = w.timing.reconnectMin
	)
	stopSettle := func() {
		if settle != nil {
			settle.Stop()
			settle = nil
		}
	}
	defer stopSettle()
	for {
		s := w.open(waitCtx, last)
		var firstEvent <-chan time.Time
		if last == "" {
			ft := time.NewTimer(w.timing.firstEvent)
			defer ft.Stop() // at most maxDrops+1 of them: every later stream resumes
			firstEvent = ft.C
		}
		var streamErr error
	read:
		for {
			var settled <-chan time.Time
			if settle != nil {
				settled = settle.C
			}
			select {
			case ev := <-s.events:
				firstEvent, drops, pause = nil, 0, w.timing.reconnectMin
				if ev.ID != "" {
					last = ev.ID
				}
				stopSettle() // whatever follows a wait means the run has moved on from it
				if ev.Kind != "run.status" {
					continue
				}
				var d statusData
				if json.Unmarshal(ev.Data, &d) != nil {
					continue // the run's own read below tells the truth anyway
				}
				switch {
				case d.Status == "completed" || d.Status == "failed" || d.Status == "cancelled":
					s.stop()
					r, err := t.getRun(ctx, w.p, w.runID)
					return r, err == nil, err
				case d.Status == "waiting" && (w.skip == nil || d.Waiting == nil || !sameWait(*w.skip, *d.Waiting)):
					settle = time.NewTimer(w.timing.settle)
				}
			case <-settled:
				settle = nil
				r, err := t.getRun(ctx, w.p, w.runID)
				if err != nil {
					s.stop()
					return api.Run{}, false, err
				}
				if w.ends(r) {
					s.stop()
					return r, true, nil
				}
				// The run had left that wait already; the stream brings what followed.
			case <-firstEvent:
				// Nothing came through: a transport or proxy holds the stream back.
				s.stop()
				return w.poll(ctx, waitCtx, t, 0)
			case streamErr = <-s.done:
				break read
			case <-waitCtx.Done():
				s.stop()
				return api.Run{}, false, w.ctxErr(ctx)
			}
		}
		var apiErr *api.Error
		switch {
		case waitCtx.Err() != nil:
			return api.Run{}, false, w.ctxErr(ctx)
		case errors.Is(streamErr, api.ErrNoEventStream):
			// An API older than the stream (404, 405), or every stream slot of the principal
			// in use (429): read the run now and then instead.
			return w.poll(ctx, waitCtx, t, w.timing.pollFirst)
		case errors.As(streamErr, &apiErr) && apiErr.Status < 500:
			return api.Run{}, false, toolError(streamErr)
		}
		// The stream dropped, failed on the server's side, or ended before the run did (a
		// replica going away): resume after the last event, unless it keeps failing.
		if drops++; drops > w.timing.maxDrops {
			return w.poll(ctx, waitCtx, t, 0)
		}
		if err := api.Sleep(waitCtx, pause); err != nil {
			return api.Run{}, false, w.ctxErr(ctx)
		}
		pause = min(pause*2, w.timing.reconnectMax)
	}
}

// ctxErr is the end of a wait whose context ended: the call's own end is an error, the wait's
// timeout is not (the caller reads the run one last time).
func (w *runWait) ctxErr(ctx context.Context) error {
	if ctx.Err() != nil {
		return toolError(ctx.Err())
	}
	return nil
}

// poll reads the run after first, then after pauses that double up to pollMax, until it ends
// the call or waitCtx ends.
func (w *runWait) poll(ctx, waitCtx context.Context, t *tools, first time.Duration) (api.Run, bool, error) {
	pause := first
	for {
		if err := api.Sleep(waitCtx, pause); err != nil {
			return api.Run{}, false, w.ctxErr(ctx)
		}
		r, err := t.getRun(ctx, w.p, w.runID)
		if err != nil {
			return api.Run{}, false, err
		}
		if w.ends(r) {
			return r, true, nil
		}
		pause = w.timing.nextPoll(pause)
	}
}

// nextPoll is the pause after one of prev.
func (t waitTiming) nextPoll(prev time.Duration) time.Duration {
	return min(max(prev*2, t.pollFirst), t.pollMax)
}

// eventStream is one open stream, read by its own goroutine.
type eventStream struct {
	events chan api.Event
	done   chan error
	stop   context.CancelFunc
}

// open starts reading the run's stream after last ("" from the start). Events come on
// events until the stream ends, with its error, on done; stop closes it.
func (w *runWait) open(ctx context.Context, last string) *eventStream {
	ctx, stop := context.WithCancel(ctx)
	s := &eventStream{events: make(chan api.Event), done: make(chan error, 1), stop: stop}
	go func() {
		s.done <- w.p.Client.RunEvents(ctx, w.p.Key, w.runID, last, func(ev api.Event) error {
			select {
			case s.events <- ev:
				return nil
			case <-ctx.Done():
				return errStreamStop
			}
		})
	}()
	return s
}

// clientContext is the context of the API requests a wait makes: the call's deadline,
// cancellation and values, but not the values net/http sets on the request of a server.
// Over /api/mcp a tool call arrives on such a request, and the gateway answers the tool's
// API requests in process (its selfTransport), with its reverse proxy. That proxy takes a
// request carrying http.ServerContextKey for one a server serves, and when the copy of an
// answer fails (a stream the wait closes) it aborts with a panic only a server recovers,
// which would take the gateway down. Without the key, the proxy just stops.
type clientContext struct{ context.Context }

func (c clientContext) Value(key any) any {
	if key == http.ServerContextKey || key == http.LocalAddrContextKey {
		return nil
	}
	return c.Context.Value(key)
}
