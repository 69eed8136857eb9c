// Package fairshare orders the engine's work across organizations, so that one organization's
// backlog cannot push every other organization's work back: start-time fair queueing, with
// the job queue's own order as the scheduler. Every job gets a tag (River's scheduled_at); an
// organization with nothing queued is tagged just before the head of the queue, busy ones take
// turns. The orchestrator README ("Workers shared fairly across organizations") gives the rules
// and why the head, and the lowest recent tag, stand for the virtual time.
package fairshare

import (
	"sync"
	"time"
)

// Defaults: a stride of a microsecond lets an organization queue millions of jobs before its
// tags reach the present.
const (
	DefaultStride = time.Microsecond
	DefaultWindow = time.Hour
)

// pending is how long a tag handed out is taken to be possibly not committed yet: the lowest
// tag handed out is kept for one to two of these.
const pending = time.Second

// Clock hands out tags. It is safe for concurrent use. Each replica keeps its own: its virtual
// time follows the jobs its workers take from the shared queue, and an organization's turns
// are counted per replica that queues its jobs.
type Clock struct {
	stride, window time.Duration

	mu sync.Mutex
	// virtual is the tag at the head of the queue, as last seen (zero before any: a window
	// before now).
	virtual time.Time
	// seen says the queue has been seen: virtual comes from it, not from the guess.
	seen bool
	// top is the latest head seen. The head steps back when jobs tagged before it commit late,
	// but an organization whose last tag is before top had no committed job left when the
	// queue stood there: it counts as having nothing queued.
	top time.Time
	// last is each organization's latest tag. An entry before top means the same as none, and
	// is dropped when the map is swept.
	last map[string]time.Time
	// sweepAt is the map size at which the next sweep runs.
	sweepAt int
	// low is the lowest tag handed out since lowSince, and prevLow the lowest of the period of
	// pending before it (zero: none): jobs that may not have committed yet.
	low, prevLow time.Time
	lowSince     time.Time
}

// NewClock returns a clock with the given stride and window (zero or less: the defaults).
func NewClock(stride, window time.Duration) *Clock {
	if stride <= 0 {
		stride = DefaultStride
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Clock{stride: stride, window: window, last: map[string]time.Time{}, sweepAt: 1024}
}

// Tags returns the tags of n new jobs of org queued at now, in order.
func (c *Clock) Tags(org string, n int, now time.Time) []time.Time {
	if n <= 0 {
		return nil
	}
	out := make([]time.Time, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	t, front := c.next(org, now)
	c.handedOut(earliest(latest(t, front), now), now)
	for i := range out {
		if t.After(now) {
			t = now
		}
		out[i] = t
		t = t.Add(c.stride)
	}
	c.last[org] = out[n-1]
	if len(c.last) >= c.sweepAt {
		c.sweep()
	}
	return out
}

// Next is the tag org's next job would get at now; nothing is taken.
func (c *Clock) Next(org string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, _ := c.next(org, now)
	return earliest(t, now)
}

// Charge counts a turn of org's that queued no job: a worker that went on with one of its
// runs instead of taking the next job from the queue (as Tags for one job, without the slice:
// it runs between every two steps).
func (c *Clock) Charge(org string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, _ := c.next(org, now)
	c.last[org] = earliest(t, now)
	if len(c.last) >= c.sweepAt {
		c.sweep()
	}
}

// next is where org's next tag would start, and the front of the queue. An organization with
// work queued goes on a stride after its last tag; one without starts a stride before the
// front, so its job is the next one taken.
func (c *Clock) next(org string, now time.Time) (t, front time.Time) {
	if c.virtual.IsZero() {
		c.virtual = now.Add(-c.window)
		c.top = c.virtual
	}
	front = c.front(now)
	if last, ok := c.last[org]; ok && !last.Before(c.top) {
		return last.Add(c.stride), front
	}
	return front.Add(-c.stride), front
}

// front is the head of the queue, or the lowest tag handed out lately when that is lower: its
// job may not have committed when the head was read.
func (c *Clock) front(now time.Time) time.Time {
	front := c.virtual
	if now.Sub(c.lowSince) < 2*pending {
		for _, l := range [2]time.Time{c.low, c.prevLow} {
			if !l.IsZero() && l.Before(front) {
				front = l
			}
		}
	}
	return front
}

// handedOut records tag, the lowest of a batch handed out at now, among the tags that may not
// have committed yet. A quiet organization's batch records the front instead (its first tag is
// a stride before it): quiet organizations' tags never push the front back, one after another.
func (c *Clock) handedOut(tag, now time.Time) {
	if now.Sub(c.lowSince) >= pending {
		c.prevLow = c.low
		if now.Sub(c.lowSince) >= 2*pending {
			c.prevLow = time.Time{} // nothing handed out over the last period
		}
		c.low, c.lowSince = time.Time{}, now
	}
	if c.low.IsZero() || tag.Before(c.low) {
		c.low = tag
	}
}

// Head sets the virtual time to tag, the tag of the first job waiting in the queue (the queue
// read again: it may stand before the last head seen, when a transaction committed jobs with
// earlier tags late).
func (c *Clock) Head(tag time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.virtual, c.seen = tag, true
	if tag.After(c.top) {
		c.top = tag
	}
}

// Took tells the clock a worker took a job tagged tag. Only the first one matters: until the
// queue's head has been read, it replaces the replica's guess of where the queue stands (a
// window before the replica started) with what the shared queue says.
func (c *Clock) Took(tag time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen {
		c.virtual, c.top, c.seen = tag, tag, true
	}
}

// sweep drops the organizations whose last tag is before the latest head seen: their next tag
// starts from the front anyway. The map then holds only organizations with queued work.
func (c *Clock) sweep() {
	for org, t := range c.last {
		if t.Before(c.top) {
			delete(c.last, org)
		}
	}
	c.sweepAt = max(1024, 2*len(c.last))
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
