// Package runnotify carries "this run changed" across replicas through Postgres LISTEN/NOTIFY,
// and fans it out to the event streams open on this replica: the Notifier batches the runs each
// commit changed into one NOTIFY every few milliseconds (only while other replicas have streams
// open), the Listener wakes the streams named (the Hub). A notification is only a wake-up:
// streams read what changed from the database, so a lost one delays an event, never loses it.
package runnotify

import (
	"strings"
	"sync"
	"time"
)

// Channel is the NOTIFY channel.
const Channel = "orchestrator_run_changes"

// CatchUp is what an organization watcher receives instead of a run id when it should read
// every change since its last read.
const CatchUp = ""

// Hub fans wake-ups out to the watchers of a run and of an organization.
type Hub struct {
	mu      sync.Mutex
	runs    map[string]map[chan struct{}]struct{}
	orgs    map[string]map[chan string]struct{}
	open    int      // watchers
	onFirst *onFirst // OnFirst's; nil: none
}

// onFirst is what the hub does when its first watcher arrives (OnFirst).
type onFirst struct {
	first   func()
	catchUp time.Duration
}

// NewHub returns a hub without watchers.
func NewHub() *Hub {
	return &Hub{runs: map[string]map[chan struct{}]struct{}{}, orgs: map[string]map[chan string]struct{}{}}
}

// OnFirst makes the hub call first whenever its first watcher arrives (none were open), and
// wake every watcher catchUp later: the other replicas learn of this replica's streams from
// its next heartbeat, which first should hurry, and what they committed without notifying it
// until then is read by that wake. Call it before the first watch.
func (h *Hub) OnFirst(catchUp time.Duration, first func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onFirst = &onFirst{first: first, catchUp: catchUp}
}

// Open says whether any watcher is open.
func (h *Hub) Open() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open > 0
}

// added counts a new watcher; the caller holds mu. For the first watcher it returns what
// arrived must do (OnFirst's), otherwise nil.
func (h *Hub) added() *onFirst {
	h.open++
	if h.open != 1 {
		return nil
	}
	return h.onFirst
}

// arrived runs OnFirst's work for a first watcher, outside mu.
func (h *Hub) arrived(f *onFirst) {
	if f == nil {
		return
	}
	f.first()
	time.AfterFunc(f.catchUp, h.wakeAll)
}

// wakeAll wakes every run watcher and asks every organization watcher to catch up.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, chans := range h.runs {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	for _, chans := range h.orgs {
		for ch := range chans {
			select {
			case ch <- CatchUp:
			default: // 64 behind: its own re-check catches up
			}
		}
	}
}

// WatchRun returns a channel that receives (coalesced) after each wake of runID.
func (h *Hub) WatchRun(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.runs[runID] == nil {
		h.runs[runID] = map[chan struct{}]struct{}{}
	}
	h.runs[runID][ch] = struct{}{}
	first := h.added()
	h.mu.Unlock()
	h.arrived(first)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.runs[runID][ch]; ok {
			h.open--
		}
		delete(h.runs[runID], ch)
		if len(h.runs[runID]) == 0 {
			delete(h.runs, runID)
		}
	}
}

// WatchOrg returns a channel that receives the ids of org's runs that woke (dropped when the
// reader is 64 behind), or CatchUp.
func (h *Hub) WatchOrg(org string) (<-chan string, func()) {
	ch := make(chan string, 64)
	h.mu.Lock()
	if h.orgs[org] == nil {
		h.orgs[org] = map[chan string]struct{}{}
	}
	h.orgs[org][ch] = struct{}{}
	first := h.added()
	h.mu.Unlock()
	h.arrived(first)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.orgs[org][ch]; ok {
			h.open--
		}
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
