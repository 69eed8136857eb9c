// Package service is the composition root of identity: it reads the settings, builds the
// shared infrastructure and the service's ports, and serves them.
package service

import (
	"context"

	"connectrpc.com/connect"
	"log/slog"
	"net/http"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	httpport "svc.dev/services/identity/internal/ports/http"
	"svc.dev/services/identity/internal/ports/rpc"
	"svc.dev/services/identity/migrations"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "identity"

// needs says which stores identity uses.
func needs() boot.Needs { return boot.Needs{Postgres: true, Redis: false} }

// Config is every setting identity reads.
type Config struct {
	Addr string
	Base boot.Config
}

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr: r.Addr("SVC_IDENTITY_ADDR", ":8081"),
		Base: boot.ReadConfig(r, needs()),
	}
	return cfg, r.Err()
}

// Application is a started identity.
type Application struct {
	base    *boot.Base
	addr    string
	handler http.Handler
}

// NewApplication connects the stores, applies migrations and assembles the HTTP surface.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (*Application, error) {
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Schema: "identity", Migrations: migrations.FS, Needs: needs()}, log)
	if err != nil {
		return nil, err
	}
	rpcPath, rpcHandler := identityv1connect.NewIdentityServiceHandler(rpc.NewIdentityServer(),
		connect.WithInterceptors(base.RPCInterceptors()...))
	handler := base.Handler(boot.Routes{
		API:          httpport.NewRouter(),
		OpenPrefixes: []string{"/api/auth/", "/api/bootstrap"},
		RPC:          map[string]http.Handler{rpcPath: rpcHandler},
	})
	return &Application{base: base, addr: cfg.Addr, handler: handler}, nil
}

// Handler is the whole HTTP surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// Run serves until ctx is done, then drains in-flight requests.
func (a *Application) Run(ctx context.Context) error { return a.base.Serve(ctx, a.addr, a.handler) }

// Close releases the stores.
func (a *Application) Close() { a.base.Close() }
