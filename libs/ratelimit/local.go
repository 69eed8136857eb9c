package ratelimit

import (
	"sync"
	"time"
)

// Local is the in-process store of buckets the Limiter falls back to. It runs the same GCRA
// as redis_rate's script, so a decision reads the same whichever store made it. Memory is
// bounded: a bucket that has refilled completely holds no information and is dropped by a
// sweep, and past maxKeys buckets an arbitrary one is forgotten (its client gets a full
// bucket: under a flood of distinct keys a replica stays up rather than exact).
type Local struct {
	now     func() time.Time
	maxKeys int

	mu sync.Mutex
	// tats holds each bucket's theoretical arrival time: the bucket is full from then on.
	tats  map[string]time.Time
	swept time.Time
}

// How often Local drops full buckets; and, when it is at maxKeys, how long it waits between
// sweeps, so that a flood of keys costs one sweep a second and not one per call.
const (
	sweepEvery    = 30 * time.Second
	minSweepEvery = time.Second
)

// NewLocal returns an empty store whose clock is now and which keeps at most maxKeys buckets.
func NewLocal(now func() time.Time, maxKeys int) *Local {
	if now == nil {
		panic("nil clock")
	}
	if maxKeys < 1 {
		panic("maxKeys must be positive")
	}
	return &Local{now: now, maxKeys: maxKeys, tats: map[string]time.Time{}, swept: now()}
}

// Allow takes one token from the bucket of key. An invalid lim is a programmer error: Allow
// panics.
func (b *Local) Allow(key string, lim Limit) Result {
	lim.mustBeValid()
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	tat, known := b.tats[key]
	res, next := gcra(now, tat, lim)
	if !res.Allowed {
		return res // nothing was taken; the bucket is unchanged
	}
	if !known && len(b.tats) >= b.maxKeys {
		for k := range b.tats { // map order is arbitrary: forget any one bucket
			delete(b.tats, k)
			break
		}
	}
	b.tats[key] = next
	return res
}

// Len is the number of buckets held (full ones not swept yet included).
func (b *Local) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.tats)
}

// sweep drops the buckets that have refilled; b.mu is held.
func (b *Local) sweep(now time.Time) {
	since := now.Sub(b.swept)
	if since < sweepEvery && (len(b.tats) < b.maxKeys || since < minSweepEvery) {
		return
	}
	for k, tat := range b.tats {
		if !tat.After(now) {
			delete(b.tats, k)
		}
	}
	b.swept = now
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
