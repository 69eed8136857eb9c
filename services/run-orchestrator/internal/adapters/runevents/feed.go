// Package runevents is the in-process feed of run changes: the run store publishes here, after
// each commit, every change of a run in commit order, and readers subscribe to one run or one
// organization. A reader that needs every change reads the logs from its last change sequence
// and follows the feed from there.
package runevents

import (
	"sync"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// DefaultBuffer is how many changes a subscription holds before its reader counts as fallen
// behind.
const DefaultBuffer = 256

// Feed fans changes out to subscriptions.
type Feed struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// New returns a feed without subscribers.
func New() *Feed { return &Feed{subs: map[*Subscription]struct{}{}} }

// Filter selects the changes of one run, or of one organization's runs (both empty: all).
type Filter struct {
	RunID, OrganizationID string
}

func (f Filter) match(c run.Change) bool {
	return (f.RunID == "" || f.RunID == c.RunID) && (f.OrganizationID == "" || f.OrganizationID == c.OrganizationID)
}

// Subscription receives the changes its filter selects, in publication order.
type Subscription struct {
	feed   *Feed
	filter Filter
	ch     chan run.Change
	lagged bool // guarded by feed.mu
	closed bool // guarded by feed.mu
}

// Subscribe starts a subscription holding up to buffer changes (<= 0: DefaultBuffer).
func (f *Feed) Subscribe(filter Filter, buffer int) *Subscription {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	s := &Subscription{feed: f, filter: filter, ch: make(chan run.Change, buffer)}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s
}

// Changes is the subscription's channel. It is closed by Close, or when the reader fell
// behind (Lagged then reports it): the reader catches up from its last sequence.
func (s *Subscription) Changes() <-chan run.Change { return s.ch }

// Lagged reports whether the subscription was ended because its buffer was full.
func (s *Subscription) Lagged() bool {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	return s.lagged
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	s.end()
}

// end removes s and closes its channel; the caller holds feed.mu.
func (s *Subscription) end() {
	if s.closed {
		return
	}
	s.closed = true
	delete(s.feed.subs, s)
	close(s.ch)
}

// Publish hands the changes of one commit to every subscription that selects them. It never
// blocks: a subscription whose buffer is full is ended as lagged.
func (f *Feed) Publish(changes []run.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) == 0 {
		return
	}
	for s := range f.subs {
		for _, c := range changes {
			if !s.filter.match(c) {
				continue
			}
			select {
			case s.ch <- c:
			default:
				s.lagged = true
				s.end()
			}
			if s.closed {
				break
			}
		}
	}
}
