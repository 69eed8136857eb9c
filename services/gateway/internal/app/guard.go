// Package app holds what the gateway's HTTP port uses of its peers: the ports through which
// the guard turns credentials into an identity (Resolver, EpochReader), takes a rate-limit
// token (RateLimiter) and counts open event streams (StreamSlots), and the decorators over
// them (the guard cache, the refusal counter). The gateway guards and proxies; it has no use
// cases, so no Application.
package app

import (
	"context"
	"time"

	"svc.dev/libs/internalauth"
	"svc.dev/proto/errs"
)

// Credentials is the raw material a client presented; the gateway does not interpret it.
type Credentials struct {
	Authorization string
	Cookie        string
	APIKey        string
	ClientIP      string
}

// Present reports whether the client sent any credential at all.
func (c Credentials) Present() bool {
	return c.Authorization != "" || c.Cookie != "" || c.APIKey != ""
}

// Resolution is the answer for one set of credentials: an identity, or the public code
// (unauthorized, no_active_organization) it was rejected with.
type Resolution struct {
	Identity  internalauth.Identity
	Rejection errs.Code
	Message   string
	// ExpiresAt is when the session or key behind an identity expires; zero when it does not
	// or is unknown. Caches never keep the identity past it.
	ExpiresAt time.Time
}

// Resolver is the identity service as the guard needs it. An error means identity could not
// answer; the guard then fails closed.
type Resolver interface {
	Resolve(ctx context.Context, c Credentials) (Resolution, error)
}
