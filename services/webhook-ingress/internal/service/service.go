// Package service is the composition root of webhook-ingress: it reads the settings, builds the
// shared infrastructure and the service's ports, and serves them.
package service

import (
	"context"
	"log/slog"
	"net/http"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	httpport "svc.dev/services/webhook-ingress/internal/ports/http"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "webhook-ingress"

// needs says which stores webhook-ingress uses.
func needs() boot.Needs { return boot.Needs{Postgres: false, Redis: true} }

// Config is every setting webhook-ingress reads.
type Config struct {
	Addr string
	Base boot.Config
}

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr: r.Addr("SVC_WEBHOOK_ADDR", ":8085"),
		Base: boot.ReadConfig(r, needs()),
	}
	return cfg, r.Err()
}

// Application is a started webhook-ingress.
type Application struct {
	base    *boot.Base
	addr    string
	handler http.Handler
}

// NewApplication connects the stores, applies migrations and assembles the HTTP surface.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (*Application, error) {
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Needs: needs()}, log)
	if err != nil {
		return nil, err
	}
	handler := base.Handler(boot.Routes{
		API:          httpport.NewRouter(),
		OpenPrefixes: []string{"/api/webhooks/"},
	})
	return &Application{base: base, addr: cfg.Addr, handler: handler}, nil
}

// Handler is the whole HTTP surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// Run serves until ctx is done, then drains in-flight requests.
func (a *Application) Run(ctx context.Context) error { return a.base.Serve(ctx, a.addr, a.handler) }

// Close releases the stores.
func (a *Application) Close() { a.base.Close() }
