// Package redis holds the gateway's Redis adapters: app.RateLimiter over the shared limiter of
// libs/ratelimit (GCRA in Redis, in process while Redis fails) with the gateway's limits, the
// reader of identity's revocation epoch, and the slots that bound open streams.
package redis

import (
	"context"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/services/gateway/internal/app"
)

// RedisRateLimiter implements app.RateLimiter: each request takes a token from its principal's
// bucket and from its organization's, both or neither, in one round trip.
type RedisRateLimiter struct {
	limiter *ratelimit.Limiter
	limit   ratelimit.Limit
	org     ratelimit.Limit
}

// NewRedisRateLimiter returns the port over limiter: each principal's bucket limited by limit,
// each organization's by org.
func NewRedisRateLimiter(limiter *ratelimit.Limiter, limit, org ratelimit.Limit) *RedisRateLimiter {
	if limiter == nil {
		panic("nil limiter")
	}
	return &RedisRateLimiter{limiter: limiter, limit: limit, org: org}
}

// Allow takes one token from the buckets of id's principal and organization; the result is
// the tighter bucket's (ratelimit.Limiter.AllowAll).
func (r *RedisRateLimiter) Allow(ctx context.Context, id internalauth.Identity) ratelimit.Result {
	return r.limiter.AllowAll(ctx,
		ratelimit.Bucket{Key: app.BucketKey(id), Limit: r.limit},
		ratelimit.Bucket{Key: app.OrganizationBucketKey(id), Limit: r.org})
}
