// Package service is the composition root of webhook-ingress: it reads the settings, builds the
// shared infrastructure, the adapters and the application over them, registers the shipped
// webhook routes whose secrets are configured, and serves them.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/libs/httpclient"
	"svc.dev/services/webhook-ingress/internal/adapters/identityclient"
	"svc.dev/services/webhook-ingress/internal/adapters/orchestratorclient"
	redisadapter "svc.dev/services/webhook-ingress/internal/adapters/redis"
	"svc.dev/services/webhook-ingress/internal/app"
	"svc.dev/services/webhook-ingress/internal/domain/route"
	"svc.dev/services/webhook-ingress/internal/domain/signature"
	"svc.dev/services/webhook-ingress/internal/ports/httpapi"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "webhook-ingress"

// needs says which stores webhook-ingress uses.
func needs() boot.Needs { return boot.Needs{Postgres: false, Redis: true} }

// Config is every setting webhook-ingress reads.
type Config struct {
	Addr            string
	OrchestratorURL string
	IdentityURL     string // identity's LookupOrganization: route organizations by slug
	GitHub          RouteConfig
	Standard        RouteConfig
	Base            boot.Config
}

// RouteConfig is one shipped route's settings; the route is enabled when Secret is set.
type RouteConfig struct {
	// Route names the route in logs; the variables are named for messages.
	Route                              string
	SecretVar, OrgVar, WorkflowVar     string
	Secret, Organization, WorkflowName string
	// Key is the HMAC key the secret decodes to.
	Key []byte
}

// Enabled reports whether the route's secret is configured.
func (c RouteConfig) Enabled() bool { return len(c.Key) > 0 }

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr:            r.Addr("SVC_WEBHOOK_ADDR", ":8085"),
		OrchestratorURL: r.URL("SVC_ORCHESTRATOR_URL", "http://127.0.0.1:8083", "http", "https"),
		IdentityURL:     r.URL("SVC_IDENTITY_URL", "http://127.0.0.1:8081", "http", "https"),
		GitHub:          readRoute(r, "POST /api/webhooks/github", "GITHUB"),
		Standard:        readRoute(r, "POST /api/webhooks/events/:source", "STANDARD"),
		Base:            boot.ReadConfig(r, needs()),
	}
	err := r.Err()
	if cfg.GitHub.Secret != "" {
		cfg.GitHub.Key = []byte(cfg.GitHub.Secret)
	}
	if cfg.Standard.Secret != "" {
		key, kerr := signature.ParseStandardSecret(cfg.Standard.Secret)
		if kerr != nil {
			err = errors.Join(err, fmt.Errorf("setting %s: %w", cfg.Standard.SecretVar, kerr))
		}
		cfg.Standard.Key = key
	}
	for _, rc := range []RouteConfig{cfg.GitHub, cfg.Standard} {
		err = errors.Join(err, rc.check())
	}
	return cfg, err
}

func readRoute(r *env.Reader, name, key string) RouteConfig {
	c := RouteConfig{Route: name,
		SecretVar: "SVC_WEBHOOK_" + key + "_SECRET", OrgVar: "SVC_WEBHOOK_" + key + "_ORG", WorkflowVar: "SVC_WEBHOOK_" + key + "_WORKFLOW"}
	c.Secret = r.String(c.SecretVar, "")
	c.Organization = r.String(c.OrgVar, "")
	c.WorkflowName = r.String(c.WorkflowVar, "")
	return c
}

// check refuses a configured route that cannot work: a secret without its organization or
// workflow. The organization (a slug, or an org_... id) is not checked against identity here:
// a route may be configured before its organization exists, and starts working once it does.
func (c RouteConfig) check() error {
	if c.Secret == "" {
		return nil
	}
	var err error
	if c.Organization == "" {
		err = errors.Join(err, fmt.Errorf("setting %s is required when %s is set", c.OrgVar, c.SecretVar))
	}
	if c.WorkflowName == "" {
		err = errors.Join(err, fmt.Errorf("setting %s is required when %s is set", c.WorkflowVar, c.SecretVar))
	}
	return err
}

// Application is a started webhook-ingress.
type Application struct {
	base    *boot.Base
	addr    string
	handler http.Handler
}

// NewApplication connects Redis, registers the configured routes, builds the application over
// its adapters and assembles the HTTP surface.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (a *Application, err error) {
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Needs: needs()}, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			base.Close()
		}
	}()
	registry, err := NewRegistry(ctx, cfg, time.Now, log)
	if err != nil {
		return nil, err
	}
	hc := httpclient.New(httpclient.Config{Peer: "run-orchestrator", BaseURL: cfg.OrchestratorURL, Timeout: 10 * time.Second,
		Service: Name, Signer: base.Signer, Telemetry: base.Tel})
	identityHTTP := httpclient.New(httpclient.Config{Peer: "identity", BaseURL: cfg.IdentityURL, Timeout: 5 * time.Second,
		Service: Name, Signer: base.Signer, Telemetry: base.Tel})
	application := app.New(
		orchestratorclient.New(hc, connect.WithInterceptors(base.RPCInterceptors()...)),
		redisadapter.NewIdempotencyStore(base.Redis, base.Keys),
		identityclient.New(identityHTTP.HTTP(), identityHTTP.BaseURL(), identityclient.Config{},
			connect.WithInterceptors(base.RPCInterceptors()...)),
		log)
	handler := base.Handler(boot.Routes{
		API:          httpapi.NewRouter(registry, application, base.Tel.Meter, log),
		OpenPrefixes: []string{httpapi.Prefix + "/"},
	})
	return &Application{base: base, addr: cfg.Addr, handler: handler}, nil
}

// NewRegistry registers the shipped routes whose secrets are configured and logs each one as
// enabled or disabled.
func NewRegistry(ctx context.Context, cfg Config, now func() time.Time, log *slog.Logger) (*route.Registry, error) {
	registry := route.NewRegistry()
	shipped := []struct {
		cfg   RouteConfig
		build func() route.Route
	}{
		{cfg.GitHub, func() route.Route {
			return route.GitHub(cfg.GitHub.Key, route.Target{Organization: cfg.GitHub.Organization, WorkflowName: cfg.GitHub.WorkflowName})
		}},
		{cfg.Standard, func() route.Route {
			return route.StandardWebhooks(cfg.Standard.Key, route.Target{Organization: cfg.Standard.Organization, WorkflowName: cfg.Standard.WorkflowName}, now)
		}},
	}
	for _, s := range shipped {
		if !s.cfg.Enabled() {
			log.InfoContext(ctx, "webhook route disabled: its secret is not set", "route", s.cfg.Route, "setting", s.cfg.SecretVar)
			continue
		}
		if err := registry.Register(s.build()); err != nil {
			return nil, err
		}
		log.InfoContext(ctx, "webhook route enabled", "route", s.cfg.Route,
			"organization", s.cfg.Organization, "workflow", s.cfg.WorkflowName)
	}
	return registry, nil
}

// Handler is the whole HTTP surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// Run serves until ctx is done, then drains in-flight requests.
func (a *Application) Run(ctx context.Context) error { return a.base.Serve(ctx, a.addr, a.handler) }

// Close releases the stores.
func (a *Application) Close() { a.base.Close() }
