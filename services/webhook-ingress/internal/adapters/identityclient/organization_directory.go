// Package identityclient resolves a route's organization setting into an organization id
// through identity's internal API (identity.v1 LookupOrganization) over Connect, through
// libs/httpclient: calls are signed as this service, traced, and a dead identity costs a fast
// failure through the breaker.
//
// A route names its organization by slug, looked up per delivery, so that a route configured
// before its organization exists starts working once it does: a found organization is kept for
// a few seconds (an organization's slug and id never change), a not-found answer never. An
// organization id (org_...) is taken as it is, without a call.
package identityclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"svc.dev/libs/wire"
	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/webhook-ingress/internal/app/port"
)

// CacheTTL is how long a found organization is reused without asking identity again.
const CacheTTL = 5 * time.Second

// MaxCached bounds the cache. Only the configured routes' slugs are ever looked up, so it is
// never reached in practice; past it, expired entries are dropped, and while none has expired
// new answers are simply not cached.
const MaxCached = 256

// peer names identity in the errors of the use case (and so in the 503's log line).
const peer = "identity"

// Config tunes an OrganizationDirectory; zero values take the defaults.
type Config struct {
	// TTL is how long a found organization is cached; zero means CacheTTL.
	TTL time.Duration
	// Now is the clock of the cache; nil means time.Now.
	Now func() time.Time
}

// OrganizationDirectory is the port.Organizations over identity.v1.
type OrganizationDirectory struct {
	rpc identityv1connect.IdentityServiceClient
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	found map[string]cached
}

type cached struct {
	id      string
	expires time.Time
}

// New returns a directory calling identity at baseURL through httpClient (from
// libs/httpclient, which signs, traces and breaks).
func New(httpClient connect.HTTPClient, baseURL string, cfg Config, opts ...connect.ClientOption) *OrganizationDirectory {
	if httpClient == nil {
		panic("nil http client")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = CacheTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &OrganizationDirectory{
		rpc: identityv1connect.NewIdentityServiceClient(httpClient, baseURL, opts...),
		ttl: cfg.TTL, now: cfg.Now, found: map[string]cached{},
	}
}

// Resolve implements port.Organizations: an organization id is its own answer; a slug is
// looked up (or taken from the cache). No organization with the slug is
// port.ErrOrganizationNotFound; identity not answering is an *port.UnavailableError, never a
// not-found.
func (d *OrganizationDirectory) Resolve(ctx context.Context, ref string) (string, error) {
	if wire.ValidID(wire.Organization, ref) {
		return ref, nil
	}
	if id, ok := d.cached(ref); ok {
		return id, nil
	}
	resp, err := d.rpc.LookupOrganization(ctx, connect.NewRequest(&identityv1.LookupOrganizationRequest{Slug: ref}))
	if err != nil {
		return "", &port.UnavailableError{Peer: peer, Err: fmt.Errorf("LookupOrganization: %w", err)}
	}
	switch res := resp.Msg.GetResult().(type) {
	case *identityv1.LookupOrganizationResponse_Organization:
		id := res.Organization.GetId()
		if !wire.ValidID(wire.Organization, id) {
			return "", &port.UnavailableError{Peer: peer, Err: fmt.Errorf("LookupOrganization answered the organization id %q", id)}
		}
		d.remember(ref, id)
		return id, nil
	case *identityv1.LookupOrganizationResponse_NotFound:
		return "", fmt.Errorf("organization %q: %w", ref, port.ErrOrganizationNotFound)
	default:
		return "", &port.UnavailableError{Peer: peer, Err: fmt.Errorf("LookupOrganization answered no result")}
	}
}

func (d *OrganizationDirectory) cached(slug string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.found[slug]
	if !ok {
		return "", false
	}
	if !d.now().Before(c.expires) {
		delete(d.found, slug)
		return "", false
	}
	return c.id, true
}

func (d *OrganizationDirectory) remember(slug, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if len(d.found) >= MaxCached {
		for s, c := range d.found {
			if !now.Before(c.expires) {
				delete(d.found, s)
			}
		}
		if len(d.found) >= MaxCached {
			return
		}
	}
	d.found[slug] = cached{id: id, expires: now.Add(d.ttl)}
}
