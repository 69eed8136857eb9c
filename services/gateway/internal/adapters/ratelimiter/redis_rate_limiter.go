// Package ratelimiter is the gateway's adapter for app.RateLimiter: the shared limiter of
// libs/ratelimit (GCRA in Redis, in process while Redis fails) with the gateway's one limit.
package ratelimiter

import (
	"context"

	"svc.dev/libs/ratelimit"
)

// RedisRateLimiter implements app.RateLimiter with one limit for every bucket.
type RedisRateLimiter struct {
	limiter *ratelimit.Limiter
	limit   ratelimit.Limit
}

// NewRedisRateLimiter returns the port over limiter, each bucket limited by limit.
func NewRedisRateLimiter(limiter *ratelimit.Limiter, limit ratelimit.Limit) *RedisRateLimiter {
	if limiter == nil {
		panic("nil limiter")
	}
	return &RedisRateLimiter{limiter: limiter, limit: limit}
}

// Allow takes one token from the bucket of key.
func (r *RedisRateLimiter) Allow(ctx context.Context, key string) ratelimit.Result {
	return r.limiter.Allow(ctx, key, r.limit)
}
