// Package fairshare orders the engine's work across organizations, so that one organization's
// backlog cannot push every other organization's work back: start-time fair queueing, with
// the job queue's own order as the scheduler.
//
// Every job that continues a run gets a tag, and the queue serves jobs in tag order (the engine
// writes the tag as River's scheduled_at, which River's fetch orders by). An organization's
// jobs get tags one stride apart, after its own last tag, or, when it has nothing queued, from
// the virtual time: the tag at the head of the queue, the next job a worker will take. So
//   - an organization with nothing queued is served next, right after the work in hand,
//     however long another organization's queue (its job is tagged just before the head);
//   - organizations that all have queued work take turns, one job each;
//   - one organization alone is served as before, by every worker: tags only order the work,
//     they never hold it back.
//
// Tags live in a band below the present. The virtual time starts a window (an hour) before the
// replica starts and follows the head of the queue, which moves on a stride per job taken, far
// slower than the clock, and no tag is ever later than now (a tag in the future would make
// River hold the job back).
//
// Why the head and not the latest job taken: tags are handed out before the jobs commit, and
// transactions commit in any order, so a worker may take a job whose tag is later than those of
// jobs about to commit. Taken for where the queue stands, such a tag would put the next
// organization's job behind all of those.
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
	// last is each organization's latest tag. An entry at or before the virtual time means the
	// same as none, and is dropped when the map is swept.
	last map[string]time.Time
	// sweepAt is the map size at which the next sweep runs.
	sweepAt int
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
	t := c.next(org, now)
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
	if t := c.next(org, now); t.Before(now) {
		return t
	}
	return now
}

// Charge counts a turn of org's that queued no job: a worker that went on with one of its
// runs instead of taking the next job from the queue (as Tags for one job, without the slice:
// it runs between every two steps).
func (c *Clock) Charge(org string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.next(org, now)
	if t.After(now) {
		t = now
	}
	c.last[org] = t
	if len(c.last) >= c.sweepAt {
		c.sweep()
	}
}

// next is where org's next tag would start. An organization with work queued goes on a
// stride after its last tag; one without starts a stride before the head of the queue, so its
// job is the next one taken.
func (c *Clock) next(org string, now time.Time) time.Time {
	if c.virtual.IsZero() {
		c.virtual = now.Add(-c.window)
	}
	if last, ok := c.last[org]; ok && !last.Before(c.virtual) {
		return last.Add(c.stride)
	}
	return c.virtual.Add(-c.stride)
}

// Head sets the virtual time to tag, the tag of the first job waiting in the queue (the queue
// read again: it may stand before the last head seen, when a transaction committed jobs with
// earlier tags late).
func (c *Clock) Head(tag time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.virtual, c.seen = tag, true
}

// Took tells the clock a worker took a job tagged tag. Only the first one matters: until the
// queue's head has been read, it replaces the replica's guess of where the queue stands (a
// window before the replica started) with what the shared queue says.
func (c *Clock) Took(tag time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen {
		c.virtual, c.seen = tag, true
	}
}

// sweep drops the organizations whose last tag the virtual time has passed: their next tag
// starts from the virtual time anyway. The map then holds only organizations with queued work.
func (c *Clock) sweep() {
	for org, t := range c.last {
		if !t.After(c.virtual) {
			delete(c.last, org)
		}
	}
	c.sweepAt = max(1024, 2*len(c.last))
}
