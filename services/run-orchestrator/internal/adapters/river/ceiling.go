package river

import (
	"context"
	"sync"
	"time"
)

// The ceiling on an organization's work in flight. Fair turns order the queue, but a step in
// progress is never preempted: an organization whose steps each take minutes could hold every
// worker for minutes, and a quiet organization's job would wait for the first to come free.
// So no organization holds more than a ceiling of a replica's workers (by default nine in
// ten): the rest stay free for others, and one organization alone still has nearly all.
//
// A worker that takes a job of an organization at its ceiling keeps it, waiting for one of
// the organization's workers to come free, as long as nothing of anyone else is queued and
// for at most a second; otherwise it gives the job back (River's snooze: available again at
// once, behind the tagged work) and takes the head of the queue. So a spare worker costs one
// give-back a second while an organization is at its ceiling, not a loop of them.

// ceilingWait is the longest a worker waits with a job of an organization at its ceiling.
const ceilingWait = time.Second

// ceiling counts each organization's workers in flight on this replica.
type ceiling struct {
	max int // 0: none

	mu   sync.Mutex
	held map[string]int
	// freed is closed, and replaced, whenever a worker of any organization comes free.
	freed chan struct{}
}

func newCeiling(maxPerOrg int) *ceiling {
	return &ceiling{max: maxPerOrg, held: map[string]int{}, freed: make(chan struct{})}
}

// acquire takes one of org's slots. It waits while org is at its ceiling, until a slot comes
// free, another organization's job is queued (others reports it), stop is closed, ctx ends or
// ceilingWait passes; then it reports false and the job is to be given back.
func (c *ceiling) acquire(ctx context.Context, org string, others func() bool, stop <-chan struct{}) bool {
	if c.max <= 0 || org == "" {
		return true
	}
	deadline := time.NewTimer(ceilingWait)
	defer deadline.Stop()
	tick := time.NewTicker(headEvery)
	defer tick.Stop()
	for {
		c.mu.Lock()
		if c.held[org] < c.max {
			c.held[org]++
			c.mu.Unlock()
			return true
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-tick.C:
			if others() {
				return false
			}
		case <-deadline.C:
			return false
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// release gives org's slot back.
func (c *ceiling) release(org string) {
	if c.max <= 0 || org == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[org]--; c.held[org] <= 0 {
		delete(c.held, org)
	}
	close(c.freed)
	c.freed = make(chan struct{})
}
