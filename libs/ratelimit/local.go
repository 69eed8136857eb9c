package ratelimit

import (
	"container/heap"
	"sync"
	"time"
)

// Local is the in-process store of buckets the Limiter falls back to. It runs the same GCRA
// as redis_rate's script, so a decision reads the same whichever store made it.
//
// Memory is bounded by maxKeys. A bucket that has refilled completely holds no information
// and is dropped as soon as it is full; a bucket that is not full is never forgotten, because
// forgetting it would hand its client a full one (an attacker could flood new keys to evict a
// victim's exhausted sign-in bucket). So while maxKeys buckets are in use and none is full, a
// key without a bucket is refused — RetryAfter says when the first bucket refills and frees a
// place — rather than admitted unlimited: under a flood of distinct keys a replica stays up
// and errs on the side of refusing.
type Local struct {
	now     func() time.Time
	maxKeys int

	mu sync.Mutex
	// buckets holds each bucket's theoretical arrival time (tat), from which on it is full;
	// byTAT orders the same buckets by tat, soonest full first.
	buckets map[string]*bucket
	byTAT   tatHeap
}

// bucket is one key's GCRA state and its place in Local.byTAT.
type bucket struct {
	key   string
	tat   time.Time
	index int
}

// NewLocal returns an empty store whose clock is now and which keeps at most maxKeys buckets.
func NewLocal(now func() time.Time, maxKeys int) *Local {
	if now == nil {
		panic("nil clock")
	}
	if maxKeys < 1 {
		panic("maxKeys must be positive")
	}
	return &Local{now: now, maxKeys: maxKeys, buckets: map[string]*bucket{}}
}

// Allow takes one token from the bucket of key. An invalid lim is a programmer error: Allow
// panics.
func (b *Local) Allow(key string, lim Limit) Result {
	lim.mustBeValid()
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropFull(now)
	bk, known := b.buckets[key]
	var tat time.Time
	if known {
		tat = bk.tat
	}
	res, next := gcra(now, tat, lim)
	if !res.Allowed {
		return res // nothing was taken; the bucket is unchanged
	}
	if known {
		bk.tat = next
		heap.Fix(&b.byTAT, bk.index)
		return res
	}
	if len(b.buckets) >= b.maxKeys {
		// Every bucket held is in use (full ones were just dropped): refuse until one refills.
		wait := b.byTAT[0].tat.Sub(now)
		return Result{Limit: lim.Burst, RetryAfter: wait, ResetAfter: wait}
	}
	bk = &bucket{key: key, tat: next}
	b.buckets[key] = bk
	heap.Push(&b.byTAT, bk)
	return res
}

// Len is the number of buckets held.
func (b *Local) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buckets)
}

// dropFull forgets the buckets that have refilled by now; b.mu is held. Each bucket is
// dropped once, so this costs O(log n) per bucket over its life, not a scan per call.
func (b *Local) dropFull(now time.Time) {
	for len(b.byTAT) > 0 && !b.byTAT[0].tat.After(now) {
		bk, _ := heap.Pop(&b.byTAT).(*bucket)
		delete(b.buckets, bk.key)
	}
}

// tatHeap is a min-heap of buckets by tat (container/heap).
type tatHeap []*bucket

func (h tatHeap) Len() int           { return len(h) }
func (h tatHeap) Less(i, j int) bool { return h[i].tat.Before(h[j].tat) }
func (h tatHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *tatHeap) Push(x any) {
	bk, _ := x.(*bucket)
	bk.index = len(*h)
	*h = append(*h, bk)
}

func (h *tatHeap) Pop() any {
	old := *h
	n := len(old)
	bk := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return bk
}

// gcra decides one request at now for a bucket whose theoretical arrival time is tat (zero
// for a bucket never seen), the algorithm of redis_rate's allowN script: each request moves
// tat one emission interval (Period/Rate) later, and a request is allowed while tat stays
// within Burst intervals of now. It returns the decision and the bucket's new tat.
func gcra(now, tat time.Time, lim Limit) (Result, time.Time) {
	emission := lim.Period / time.Duration(lim.Rate)
	burstOffset := emission * time.Duration(lim.Burst)
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(emission)
	diff := now.Sub(next.Add(-burstOffset))
	if diff < 0 {
		return Result{Limit: lim.Burst, RetryAfter: -diff, ResetAfter: tat.Sub(now)}, tat
	}
	return Result{Allowed: true, Limit: lim.Burst, Remaining: int(diff / emission), ResetAfter: next.Sub(now)}, next
}
