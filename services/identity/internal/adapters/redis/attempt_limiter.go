package redis

// The attempt limiters adapt libs/ratelimit to identity's AttemptLimiter port: a token bucket
// per key in Redis (GCRA), answered from process memory while Redis is down. Each of identity's
// limits (port.Limits) is one AttemptLimiter with its own Limit.

import (
	"context"
	"time"

	"svc.dev/libs/ratelimit"
	"svc.dev/services/identity/internal/app/port"
)

// SignInAttempts is the sign-in limit: 10 sign-in attempts a minute per (IP, email).
func SignInAttempts() ratelimit.Limit { return ratelimit.PerMinute(10) }

// SignUpAttempts is 30 sign-ups a minute per client address: every one costs an argon2id
// hash, and a household or an office behind one address still signs up freely.
func SignUpAttempts() ratelimit.Limit { return ratelimit.PerMinute(30) }

// PasswordResetAttempts is 10 calls a minute per client address to request-password-reset
// and reset-password together: a link costs a mail, a reset a hash.
func PasswordResetAttempts() ratelimit.Limit { return ratelimit.PerMinute(10) }

// ChangePasswordAttempts is 10 change-password attempts a minute per user, as for sign-in:
// a stolen session must not become a way to guess the password at leisure.
func ChangePasswordAttempts() ratelimit.Limit { return ratelimit.PerMinute(10) }

// AcceptInvitationAttempts is 10 accept-invitation calls a minute per user and, apart, per
// client address: emails are not verified, so whoever signs up with an invitee's address
// could otherwise try invitation ids as fast as they can send them.
func AcceptInvitationAttempts() ratelimit.Limit { return ratelimit.PerMinute(10) }

// Limits returns the limiters of port.Limits, all over one *ratelimit.Limiter (one Redis
// keyspace; the use cases' keys say which limit each bucket belongs to).
func Limits(l Allower) port.Limits {
	return port.Limits{
		SignIn:         New(l, SignInAttempts()),
		SignUp:         New(l, SignUpAttempts()),
		PasswordReset:  New(l, PasswordResetAttempts()),
		ChangePassword: New(l, ChangePasswordAttempts()),
		// One limiter for both keys of an attempt (user and address): the keys differ.
		AcceptInvitation: New(l, AcceptInvitationAttempts()),
	}
}

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
