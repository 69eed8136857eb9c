// Package runnotify carries "this run changed" across replicas through Postgres LISTEN/NOTIFY,
// and fans it out to the event streams open on this replica.
//
// The Notifier takes the changes the run store publishes after each commit (it is a
// runstore.Publisher) and sends one NOTIFY per few milliseconds for the runs that changed,
// off the step's hot path: a step pays a map insert, not a round trip. The Listener holds one
// connection per replica LISTENing on the channel and wakes the streams of the runs and
// organizations named (the Hub). A notification is only a wake-up: streams read what changed
// from the database (the logs cursor), so a notification lost (a listener reconnecting, a
// NOTIFY that failed) delays an event until the stream's periodic re-check, never loses it.
package runnotify

import (
	"strings"
	"sync"
)

// Channel is the NOTIFY channel.
const Channel = "orchestrator_run_changes"

// Hub fans wake-ups out to the watchers of a run and of an organization.
type Hub struct {
	mu   sync.Mutex
	runs map[string]map[chan struct{}]struct{}
	orgs map[string]map[chan string]struct{}
}

// NewHub returns a hub without watchers.
func NewHub() *Hub {
	return &Hub{runs: map[string]map[chan struct{}]struct{}{}, orgs: map[string]map[chan string]struct{}{}}
}

// WatchRun returns a channel that receives (coalesced) after each wake of runID.
func (h *Hub) WatchRun(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.runs[runID] == nil {
		h.runs[runID] = map[chan struct{}]struct{}{}
	}
	h.runs[runID][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.runs[runID], ch)
		if len(h.runs[runID]) == 0 {
			delete(h.runs, runID)
		}
	}
}

// WatchOrg returns a channel that receives the ids of org's runs that woke (dropped when the
// reader is 64 behind).
func (h *Hub) WatchOrg(org string) (<-chan string, func()) {
	ch := make(chan string, 64)
	h.mu.Lock()
	if h.orgs[org] == nil {
		h.orgs[org] = map[chan string]struct{}{}
	}
	h.orgs[org][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.orgs[org], ch)
		if len(h.orgs[org]) == 0 {
			delete(h.orgs, org)
		}
	}
}

// Wake wakes the watchers of the run runID of org.
func (h *Hub) Wake(org, runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.runs[runID] {
		select {
		case ch <- struct{}{}:
		default: // a wake is pending already
		}
	}
	for ch := range h.orgs[org] {
		select {
		case ch <- runID:
		default:
		}
	}
}

// wakePayload wakes every "org/run" line of a notification's payload.
func (h *Hub) wakePayload(payload string) {
	for line := range strings.SplitSeq(payload, "\n") {
		if org, id, ok := strings.Cut(line, "/"); ok {
			h.Wake(org, id)
		}
	}
}
