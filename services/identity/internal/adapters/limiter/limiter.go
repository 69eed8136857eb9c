// Package limiter adapts libs/ratelimit to identity's AttemptLimiter port: a token bucket per
// key in Redis (GCRA), answered from process memory while Redis is down.
package limiter

import (
	"context"
	"time"

	"svc.dev/libs/ratelimit"
)

// SignInAttempts is contract §1's limit: 10 sign-in attempts a minute per (IP, email).
func SignInAttempts() ratelimit.Limit { return ratelimit.PerMinute(10) }

// Allower is *ratelimit.Limiter as this adapter uses it.
type Allower interface {
	Allow(ctx context.Context, key string, lim ratelimit.Limit) ratelimit.Result
}

// AttemptLimiter implements port.AttemptLimiter with one fixed limit.
type AttemptLimiter struct {
	l   Allower
	lim ratelimit.Limit
}

// New returns an AttemptLimiter allowing lim per key.
func New(l Allower, lim ratelimit.Limit) *AttemptLimiter {
	if l == nil {
		panic("nil limiter")
	}
	return &AttemptLimiter{l: l, lim: lim}
}

// Allow takes one token from key's bucket.
func (a *AttemptLimiter) Allow(ctx context.Context, key string) (bool, time.Duration) {
	res := a.l.Allow(ctx, key, a.lim)
	return res.Allowed, res.RetryAfter
}
