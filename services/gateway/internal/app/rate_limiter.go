package app

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
)

// RateLimiter is the token bucket store as the guard needs it: one token per guarded request
// of id, from the bucket of its principal (BucketKey) and from its organization's
// (OrganizationBucketKey) alike, with the capacities and refills the limiter was built with.
// It always decides; an outage of its store is its own business.
type RateLimiter interface {
	Allow(ctx context.Context, id internalauth.Identity) ratelimit.Result
}

// BucketKey names the bucket of an identity: one per (organization, principal), so that one
// organization cannot starve another and a user's session cannot starve the organization's
// API keys (docs/API.md, "Rate limits"). Principals are prefixed ids (usr_, key_), so a user
// and a key never share a bucket.
func BucketKey(id internalauth.Identity) string {
	return "gw:" + id.OrganizationID + ":" + id.Principal()
}

// OrganizationBucketKey names the bucket every principal of id's organization shares, so that
// creating API keys does not multiply an organization's share of the system. Principals are
// prefixed ids, never "org", so it cannot be a principal's bucket.
func OrganizationBucketKey(id internalauth.Identity) string {
	return "gw:org:" + id.OrganizationID
}

// refusalCounting counts the requests its RateLimiter refuses.
type refusalCounting struct {
	next    RateLimiter
	refused metric.Int64Counter
}

// CountRefusals decorates next so that each refusal adds one to svc_gateway_rate_limited_total
// on mp.
func CountRefusals(next RateLimiter, mp metric.MeterProvider) RateLimiter {
	if next == nil {
		panic("nil rate limiter")
	}
	if mp == nil {
		panic("nil meter provider")
	}
	refused, err := mp.Meter("svc.dev/services/gateway").Int64Counter("svc_gateway_rate_limited",
		metric.WithDescription("Guarded requests refused with 429 rate_limited."))
	if err != nil {
		panic(fmt.Sprintf("rate limited counter: %v", err)) // only for an invalid name
	}
	refused.Add(context.Background(), 0) // the series exists before the first refusal
	return refusalCounting{next: next, refused: refused}
}

func (c refusalCounting) Allow(ctx context.Context, id internalauth.Identity) ratelimit.Result {
	res := c.next.Allow(ctx, id)
	if !res.Allowed {
		c.refused.Add(context.WithoutCancel(ctx), 1)
	}
	return res
}
