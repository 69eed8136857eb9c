package app

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"svc.dev/libs/ratelimit"
)

// EpochReader reads identity's revocation epoch: a counter identity moves forward after every
// successful mutating auth call (sign-out, key revocation, password change, membership and
// active-organization changes...), before it answers that call.
type EpochReader interface {
	Epoch(ctx context.Context) (int64, error)
}

// LimitingResolver is a Resolver that can also take the resolved identity's rate-limit
// token, overlapping the two when it can. The Result is nil when no token was taken (the
// credentials were rejected, or an error).
type LimitingResolver interface {
	Resolver
	ResolveAndAllow(ctx context.Context, c Credentials, limiter RateLimiter) (Resolution, *ratelimit.Result, error)
}

// DefaultGuardCacheEntries bounds the guard cache; past it the oldest entry is evicted.
const DefaultGuardCacheEntries = 100_000

// CachingResolver keeps the identities next resolved (never its rejections) for at most ttl,
// and never past the session's or key's expiry. An entry is used only while identity's
// revocation epoch still equals the one read before the Resolve call that produced it, so a
// revocation committed before that epoch moved is seen by the very next request (docs/API.md,
// "Authentication and organizations").
// The epoch is read on every hit, at the same time as the rate-limit token is taken. When the
// epoch cannot be read, the cache is not used: every request is resolved by next.
type CachingResolver struct {
	next       Resolver
	epochs     EpochReader
	ttl        time.Duration
	maxEntries int
	now        func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*list.Element
	order   *list.List // of *cacheEntry, oldest first

	// lookups is svc_gateway_guard_cache_total (nil: not counted).
	lookups metric.Int64Counter
}

// CountLookups returns c counting its lookups on mp: svc_gateway_guard_cache_total{result},
// a hit when a fresh entry answered under the current epoch, a miss when identity was asked.
func (c *CachingResolver) CountLookups(mp metric.MeterProvider) *CachingResolver {
	lookups, err := mp.Meter("svc.dev/services/gateway").Int64Counter("svc_gateway_guard_cache_total",
		metric.WithDescription("Guard cache lookups of this replica, by result: hit (a fresh entry answered under the current revocation epoch) or miss (identity was asked: no entry, an expired one, a moved or unreadable epoch)."),
		metric.WithUnit("{lookup}"))
	if err != nil {
		panic(fmt.Sprintf("guard cache counter: %v", err)) // only for an invalid name
	}
	for _, r := range []string{cacheHit, cacheMiss} {
		lookups.Add(context.Background(), 0, metric.WithAttributes(attribute.String("result", r)))
	}
	c.lookups = lookups
	return c
}

// The results of a guard cache lookup.
const (
	cacheHit  = "hit"
	cacheMiss = "miss"
)

func (c *CachingResolver) count(ctx context.Context, result string) {
	if c.lookups != nil {
		c.lookups.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("result", result)))
	}
}

type cacheEntry struct {
	key      [sha256.Size]byte
	res      Resolution
	epoch    int64
	deadline time.Time
}

// NewCachingResolver decorates next with a cache of at most maxEntries identities, each kept
// at most ttl (ttl > 0). now is the clock (nil: time.Now).
func NewCachingResolver(next Resolver, epochs EpochReader, ttl time.Duration, maxEntries int, now func() time.Time) *CachingResolver {
	if next == nil || epochs == nil {
		panic("nil dependency")
	}
	if ttl <= 0 || maxEntries <= 0 {
		panic("guard cache: ttl and size must be positive")
	}
	if now == nil {
		now = time.Now
	}
	return &CachingResolver{next: next, epochs: epochs, ttl: ttl, maxEntries: maxEntries, now: now,
		entries: map[[sha256.Size]byte]*list.Element{}, order: list.New()}
}

// Resolve answers from the cache when the entry is fresh and the epoch has not moved, and
// from next otherwise.
func (c *CachingResolver) Resolve(ctx context.Context, cr Credentials) (Resolution, error) {
	res, _, err := c.ResolveAndAllow(ctx, cr, nil)
	return res, err
}

// ResolveAndAllow resolves as Resolve does and, when limiter is not nil and the answer is an
// identity, takes one token from its bucket. On a cache hit the token is taken while the epoch
// is read. If the epoch then turns out to have moved, the credentials are resolved again; if
// they no longer resolve to the same identity, the token already taken is lost (one token of
// a bucket whose identity just changed or was revoked) and, for a new identity, one is taken
// from its own bucket.
func (c *CachingResolver) ResolveAndAllow(ctx context.Context, cr Credentials, limiter RateLimiter) (Resolution, *ratelimit.Result, error) {
	key := cacheKey(cr)
	if e, ok := c.lookup(key); ok {
		var (
			wg  sync.WaitGroup
			lim ratelimit.Result
		)
		if limiter != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lim = limiter.Allow(ctx, e.res.Identity)
			}()
		}
		epoch, err := c.epochs.Epoch(ctx)
		wg.Wait()
		var taken *ratelimit.Result
		if limiter != nil {
			taken = &lim
		}
		if err == nil && epoch == e.epoch {
			c.count(ctx, cacheHit)
			return e.res, taken, nil
		}
		c.count(ctx, cacheMiss)
		c.drop(key)
		res, rerr := c.next.Resolve(ctx, cr)
		if rerr != nil {
			return Resolution{}, nil, rerr
		}
		if err == nil {
			c.store(key, res, epoch)
		}
		if res.Rejection != "" || limiter == nil {
			return res, nil, nil
		}
		if res.Identity == e.res.Identity {
			return res, taken, nil
		}
		lim = limiter.Allow(ctx, res.Identity)
		return res, &lim, nil
	}

	// A miss: the epoch is read before identity is asked, so an entry can only be stored with
	// an epoch no newer than the state its identity was read from.
	c.count(ctx, cacheMiss)
	epoch, eerr := c.epochs.Epoch(ctx)
	res, err := c.next.Resolve(ctx, cr)
	if err != nil {
		return Resolution{}, nil, err
	}
	if eerr == nil {
		c.store(key, res, epoch)
	}
	if res.Rejection != "" || limiter == nil {
		return res, nil, nil
	}
	lim := limiter.Allow(ctx, res.Identity)
	return res, &lim, nil
}

// cacheKey digests the credentials that decide the resolution; the client address does not.
func cacheKey(cr Credentials) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range []string{cr.Authorization, cr.Cookie, cr.APIKey} {
		var n [8]byte
		l := uint64(len(s))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// lookup returns the unexpired entry of key.
func (c *CachingResolver) lookup(key [sha256.Size]byte) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return cacheEntry{}, false
	}
	e := el.Value.(*cacheEntry)
	if !c.now().Before(e.deadline) {
		c.order.Remove(el)
		delete(c.entries, key)
		return cacheEntry{}, false
	}
	return *e, true
}

// store keeps an identity (never a rejection) until min(now+ttl, its expiry).
func (c *CachingResolver) store(key [sha256.Size]byte, res Resolution, epoch int64) {
	if res.Rejection != "" || res.Identity.OrganizationID == "" {
		return
	}
	now := c.now()
	deadline := now.Add(c.ttl)
	if !res.ExpiresAt.IsZero() && res.ExpiresAt.Before(deadline) {
		deadline = res.ExpiresAt
	}
	if !now.Before(deadline) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
	}
	for c.order.Len() >= c.maxEntries {
		oldest := c.order.Front()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
	c.entries[key] = c.order.PushBack(&cacheEntry{key: key, res: res, epoch: epoch, deadline: deadline})
}

func (c *CachingResolver) drop(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
	}
}

// Len is the number of entries held, expired ones included until they are looked up.
func (c *CachingResolver) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
