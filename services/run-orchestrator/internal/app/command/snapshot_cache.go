package command

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// CatalogEpochs reads the editor's catalog epochs: per organization, a counter the editor moves
// forward after every write to that organization's workflows (create, patch, rename, delete),
// before it answers the write.
type CatalogEpochs interface {
	// Epochs returns the epoch of each of orgs, in order; 0 where it cannot be known. An error
	// means none could be read.
	Epochs(ctx context.Context, orgs []string) ([]int64, error)
}

// DefaultSnapshotCacheBytes bounds the definitions the snapshot cache holds (their JSON size;
// the parsed form costs a few times more). Past it the least recently used entry goes.
const DefaultSnapshotCacheBytes = 32 << 20

// entryOverhead is what one entry costs beside its definition, for the byte budget.
const entryOverhead = 512

// SnapshotCache keeps prepared workflow snapshots (the editor's answer, parsed, its input
// schema compiled) so that a start need not call the editor. It stays exact: an entry is used
// only while its organization's catalog epoch still equals the one read before the editor
// call that produced it. The editor moves the epoch after each write commits and before the
// write is answered, so a patch that returned before a start was received has moved the epoch
// the start reads, and the start reads the editor again. Entries also expire after ttl, which
// bounds what a write whose epoch could not be moved (Redis down at that moment) can leave.
type SnapshotCache struct {
	epochs   CatalogEpochs
	ttl      time.Duration
	maxBytes int
	now      func() time.Time

	mu      sync.Mutex
	entries map[workflowKey]*list.Element
	order   *list.List // of *snapshotEntry, least recently used first
	bytes   int
}

type snapshotEntry struct {
	key      workflowKey
	prep     prepared
	epoch    int64
	deadline time.Time
	size     int
}

// NewSnapshotCache returns a cache of at most maxBytes (DefaultSnapshotCacheBytes when 0),
// each entry kept at most ttl (> 0). now is the clock (nil: time.Now).
func NewSnapshotCache(epochs CatalogEpochs, ttl time.Duration, maxBytes int, now func() time.Time) *SnapshotCache {
	if epochs == nil {
		panic("nil catalog epochs")
	}
	if ttl <= 0 || maxBytes < 0 {
		panic("snapshot cache: ttl must be positive and the size not negative")
	}
	if maxBytes == 0 {
		maxBytes = DefaultSnapshotCacheBytes
	}
	if now == nil {
		now = time.Now
	}
	return &SnapshotCache{epochs: epochs, ttl: ttl, maxBytes: maxBytes, now: now,
		entries: map[workflowKey]*list.Element{}, order: list.New()}
}

// epochsOf reads the catalog epoch of every organization of keys in one call. A failure is
// no epoch at all: the batch then reads the editor for every workflow and keeps nothing, and
// every entry is dropped. An editor that could not move an epoch most likely failed to reach
// Redis at the same time, and an entry must not outlive the outage into a Redis that came back
// without the increment (flushed, or restored from an older snapshot).
func (c *SnapshotCache) epochsOf(ctx context.Context, keys []workflowKey) map[string]int64 {
	var orgs []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.org] {
			seen[k.org] = true
			orgs = append(orgs, k.org)
		}
	}
	got, err := c.epochs.Epochs(ctx, orgs)
	if err != nil || len(got) != len(orgs) {
		if ctx.Err() == nil {
			c.clear()
		}
		return nil
	}
	out := make(map[string]int64, len(orgs))
	for i, org := range orgs {
		if got[i] != 0 {
			out[org] = got[i]
		}
	}
	return out
}

// get returns the entry of k when it was stored under epoch and has not expired.
func (c *SnapshotCache) get(k workflowKey, epoch int64) (prepared, bool) {
	if epoch == 0 {
		return prepared{}, false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return prepared{}, false
	}
	e := el.Value.(*snapshotEntry)
	if !now.Before(e.deadline) || e.epoch < epoch { // expired, or read before the epoch moved
		c.remove(el)
		return prepared{}, false
	}
	if e.epoch != epoch { // stored under a newer epoch than this batch read: kept for the next
		return prepared{}, false
	}
	c.order.MoveToBack(el)
	return e.prep, true
}

// put keeps p for k under epoch, the epoch read before the editor was asked. Only usable
// snapshots are kept (an error answer is cheap to recompute and must not pin a workflow that
// cannot run); an entry stored under a newer epoch is never replaced by an older one.
func (c *SnapshotCache) put(k workflowKey, p prepared, epoch int64) {
	if epoch == 0 || p.err != nil {
		return
	}
	size := len(p.snap.Definition) + entryOverhead
	if size > c.maxBytes {
		return
	}
	deadline := c.now().Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		if el.Value.(*snapshotEntry).epoch > epoch {
			return
		}
		c.remove(el)
	}
	for c.bytes+size > c.maxBytes && c.order.Len() > 0 {
		c.remove(c.order.Front())
	}
	c.entries[k] = c.order.PushBack(&snapshotEntry{key: k, prep: p, epoch: epoch, deadline: deadline, size: size})
	c.bytes += size
}

// clear drops every entry.
func (c *SnapshotCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries, c.bytes = map[workflowKey]*list.Element{}, 0
	c.order.Init()
}

func (c *SnapshotCache) remove(el *list.Element) {
	e := el.Value.(*snapshotEntry)
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// Len is the number of entries held, expired ones included until they are looked up.
func (c *SnapshotCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
