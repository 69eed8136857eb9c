// Package service is the gateway's composition root: settings, peers, the guard and the
// public server.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/libs/httpclient"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/web"
	"svc.dev/services/gateway/internal/adapters/identityclient"
	"svc.dev/services/gateway/internal/adapters/redis"
	"svc.dev/services/gateway/internal/app"
	"svc.dev/services/gateway/internal/ports/httpapi"
)

// Name is the service's name in logs and spans.
const Name = "gateway"

func needs() boot.Needs { return boot.Needs{Redis: true} }

// Config is every setting the gateway reads.
type Config struct {
	PublicAddr string
	// AdminAddr serves /health and /ready for probes, apart from the public surface, where
	// every path but the open ones (httpapi's routing table) needs credentials.
	AdminAddr string
	// Peers maps each service to its base URL.
	Peers map[httpapi.Peer]string
	// RateLimitPerMinute is the capacity and the per-minute refill of each (organization,
	// principal) bucket.
	RateLimitPerMinute int
	// RateLimitOrgPerMinute is the capacity and per-minute refill of each organization's
	// bucket, which every request of the organization takes a token from as well, so that
	// more API keys do not mean a larger share (SVC_RATE_LIMIT_ORG_PER_MINUTE).
	RateLimitOrgPerMinute int
	// GuardCacheTTL is how long the guard may reuse an identity while identity's revocation
	// epoch has not moved; 0 resolves every request.
	GuardCacheTTL time.Duration
	// MaxStreams is how many run event streams one principal (SVC_GATEWAY_MAX_STREAMS, 20),
	// one user across all its organizations and API keys (SVC_GATEWAY_MAX_STREAMS_PER_USER,
	// three principals' worth) and one organization across all its principals
	// (SVC_GATEWAY_MAX_STREAMS_PER_ORG, five principals' worth) may each hold open at once,
	// across gateway replicas; past any of them 429 rate_limited. The principal's cap alone
	// would multiply with every API key or organization a user creates.
	MaxStreams app.StreamLimits
	// Origins are the trusted origins (SVC_PUBLIC_URL's and SVC_TRUSTED_ORIGINS, read as
	// identity reads them): a write the session cookie authenticates must come from a page of
	// one of them.
	Origins web.Origins
	Base    boot.Config
}

// DefaultPublicURL is SVC_PUBLIC_URL's default, identity's too: the two must agree on the
// origins they trust.
const DefaultPublicURL = "http://localhost:8080"

// OrgRateLimitMultiple is SVC_RATE_LIMIT_ORG_PER_MINUTE's default as a multiple of
// SVC_RATE_LIMIT_PER_MINUTE (600 with the default 60): an organization's users and keys
// together get ten principals' worth, however many keys it creates.
const OrgRateLimitMultiple = 10

// maxOrgRateLimit bounds SVC_RATE_LIMIT_ORG_PER_MINUTE.
const maxOrgRateLimit = 10_000_000

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		PublicAddr: r.Addr("SVC_PUBLIC_ADDR", ":8080"),
		AdminAddr:  r.Addr("SVC_GATEWAY_ADMIN_ADDR", ":8090"),
		Peers: map[httpapi.Peer]string{
			httpapi.Identity:     r.URL("SVC_IDENTITY_URL", "http://127.0.0.1:8081", "http", "https"),
			httpapi.Editor:       r.URL("SVC_EDITOR_URL", "http://127.0.0.1:8082", "http", "https"),
			httpapi.Orchestrator: r.URL("SVC_ORCHESTRATOR_URL", "http://127.0.0.1:8083", "http", "https"),
			httpapi.Scheduler:    r.URL("SVC_SCHEDULER_URL", "http://127.0.0.1:8084", "http", "https"),
			httpapi.Webhook:      r.URL("SVC_WEBHOOK_URL", "http://127.0.0.1:8085", "http", "https"),
		},
		RateLimitPerMinute: r.Int("SVC_RATE_LIMIT_PER_MINUTE", 60, 1, 1_000_000),
		GuardCacheTTL:      r.Duration("SVC_GUARD_CACHE_TTL", 5*time.Second),
		Base:               boot.ReadConfig(r, needs()),
	}
	// Unset, a user's and an organization's stream ceilings are a few principals' worth of
	// whatever the principal's is.
	perPrincipal := r.Int("SVC_GATEWAY_MAX_STREAMS", httpapi.DefaultMaxStreams, 1, 100_000)
	streams := httpapi.StreamLimitsFor(perPrincipal)
	cfg.MaxStreams = app.StreamLimits{
		PerPrincipal:    perPrincipal,
		PerUser:         r.Int("SVC_GATEWAY_MAX_STREAMS_PER_USER", streams.PerUser, 1, httpapi.MaxStreamCeiling),
		PerOrganization: r.Int("SVC_GATEWAY_MAX_STREAMS_PER_ORG", streams.PerOrganization, 1, httpapi.MaxStreamCeiling),
	}
	// Unset, the organization's bucket is ten principals' worth of whatever the principal's is.
	cfg.RateLimitOrgPerMinute = r.Int("SVC_RATE_LIMIT_ORG_PER_MINUTE",
		min(OrgRateLimitMultiple*cfg.RateLimitPerMinute, maxOrgRateLimit), 1, maxOrgRateLimit)
	public := r.URL("SVC_PUBLIC_URL", DefaultPublicURL, "http", "https")
	trusted := strings.Split(r.String("SVC_TRUSTED_ORIGINS", ""), ",")
	origins, err := web.NewOrigins(append(trusted, public)...)
	if err != nil {
		return cfg, errors.Join(r.Err(), fmt.Errorf("setting SVC_TRUSTED_ORIGINS: %w", err))
	}
	cfg.Origins = origins
	return cfg, r.Err()
}

// Application is a started gateway.
type Application struct {
	base      *boot.Base
	addr      string
	adminAddr string
	handler   http.Handler
	admin     http.Handler
}

// NewApplication builds the peers' clients and the public handler.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (*Application, error) {
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Needs: needs()}, log)
	if err != nil {
		return nil, err
	}
	upstreams := map[httpapi.Peer]httpapi.Upstream{}
	clients := map[httpapi.Peer]*httpclient.Client{}
	for peer, raw := range cfg.Peers {
		u, _ := url.Parse(raw) // validated by LoadConfig
		c := httpclient.New(httpclient.Config{
			Peer: string(peer), BaseURL: raw, Signer: base.Signer, Telemetry: base.Tel,
			// Forwarded requests carry the client's identity or, on open routes, none.
			Service: "",
		})
		clients[peer] = c
		upstreams[peer] = httpapi.Upstream{URL: u, Transport: c.Transport()}
	}
	// Resolve calls are signed as the gateway itself: they happen before any identity exists.
	resolveHTTP := httpclient.New(httpclient.Config{
		Peer: "identity-rpc", BaseURL: cfg.Peers[httpapi.Identity], Signer: base.Signer,
		Telemetry: base.Tel, Service: Name, Timeout: 5 * time.Second,
	})
	resolver := identityclient.New(resolveHTTP.HTTP(), resolveHTTP.BaseURL(), connect.WithInterceptors(base.RPCInterceptors()...))
	// Token buckets in Redis; in process, per replica, while Redis fails (libs/ratelimit).
	limiter := ratelimit.NewWithOptions(base.Redis, base.Keys, log, ratelimit.Options{Meter: base.Tel.Meter})
	buckets := app.CountRefusals(
		redis.NewRedisRateLimiter(limiter, ratelimit.PerMinute(cfg.RateLimitPerMinute), ratelimit.PerMinute(cfg.RateLimitOrgPerMinute)),
		base.Tel.Meter)
	// Identities are reused for at most GuardCacheTTL while identity's revocation epoch stays
	// put (app.CachingResolver), so a revocation still fails the very next request.
	var guardResolver app.Resolver = resolver
	if cfg.GuardCacheTTL > 0 {
		guardResolver = app.NewCachingResolver(resolver, redis.NewRedisEpochReader(base.Redis, base.Keys),
			cfg.GuardCacheTTL, app.DefaultGuardCacheEntries, nil).CountLookups(base.Tel.Meter)
	}
	gw := httpapi.NewGateway(log, guardResolver, buckets, upstreams).WithMaxStreams(cfg.MaxStreams).
		WithTrustedOrigins(cfg.Origins).WithStreamGauge(base.Tel.Meter)
	if base.Redis != nil {
		// The caps on open streams hold across replicas, counted in Redis (on each replica
		// alone while Redis fails).
		gw = gw.WithStreamSlots(redis.NewRedisStreamSlots(base.Redis, base.Keys, redis.DefaultStreamLease))
	}

	// The gateway's own /ready: identity (the guard) is required. Redis is not: without it the
	// gateway limits in process and keeps serving, so a Redis outage marks it degraded rather
	// than taking every replica out of service.
	base.Optional["redis"] = base.Checks["redis"]
	delete(base.Checks, "redis")
	base.Checks["identity"] = func(ctx context.Context) error {
		return clients[httpapi.Identity].Do(ctx, http.MethodGet, "/health", nil, nil)
	}
	return &Application{
		base:      base,
		addr:      cfg.PublicAddr,
		adminAddr: cfg.AdminAddr,
		handler:   web.Chain(gw, web.Standard(log, base.Tel, Name)...),
		admin:     base.Handler(boot.Routes{}),
	}, nil
}

// Handler is the whole public surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// AdminHandler serves /health and /ready, for tests that serve it themselves.
func (a *Application) AdminHandler() http.Handler { return a.admin }

// Run serves the public and the admin surface until ctx is done, then drains both. The public
// address is bound before the admin one, so /health answering means the public surface is up.
// If either server fails, both stop.
func (a *Application) Run(ctx context.Context) error {
	return a.base.ServeAll(ctx, boot.Surface{Addr: a.addr, Handler: a.handler}, boot.Surface{Addr: a.adminAddr, Handler: a.admin})
}

// Close releases the stores.
func (a *Application) Close() { a.base.Close() }
