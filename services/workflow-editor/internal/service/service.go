// Package service is the composition root of workflow-editor: it reads the settings, builds the
// shared infrastructure and the service's ports, and serves them.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/proto/connectors"
	"svc.dev/proto/gen/editor/v1/editorv1connect"
	"svc.dev/services/workflow-editor/internal/adapters/postgres"
	"svc.dev/services/workflow-editor/internal/adapters/redis"
	"svc.dev/services/workflow-editor/internal/app"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/ports/httpapi"
	"svc.dev/services/workflow-editor/internal/ports/rpc"
	"svc.dev/services/workflow-editor/migrations"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "workflow-editor"

// needs says which stores workflow-editor uses: Redis holds the catalog epochs.
func needs() boot.Needs { return boot.Needs{Postgres: true, Redis: true} }

// Config is every setting workflow-editor reads.
type Config struct {
	Addr string
	Base boot.Config
}

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr: r.Addr("SVC_EDITOR_ADDR", ":8082"),
		Base: boot.ReadConfig(r, needs()),
	}
	return cfg, r.Err()
}

// Application is a started workflow-editor.
type Application struct {
	base    *boot.Base
	addr    string
	handler http.Handler
}

// NewApplication connects the stores, applies migrations and assembles the HTTP surface: the
// public routes under /api and the editor.v1 internal API.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (*Application, error) {
	entries, err := connectors.Load()
	if err != nil {
		return nil, err
	}
	cat, err := catalog.New(entries)
	if err != nil {
		return nil, fmt.Errorf("connector catalog: %w", err)
	}
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Schema: "editor", Migrations: migrations.FS, Needs: needs()}, log)
	if err != nil {
		return nil, err
	}
	// Redis only holds the catalog epochs the orchestrators' snapshot caches read: its outage
	// marks the editor degraded, not unready (the orchestrators then read every snapshot here).
	base.Optional["redis"] = base.Checks["redis"]
	delete(base.Checks, "redis")
	repo := redis.NewRepository(postgres.NewWorkflowRepository(base.Pool), redis.NewRedisEpochs(base.Redis, base.Keys), log)
	application := app.New(repo, cat, time.Now)
	rpcPath, rpcHandler := editorv1connect.NewEditorServiceHandler(rpc.NewEditorServer(application.Queries.GetWorkflow),
		base.RPCHandlerOptions()...)
	handler := base.Handler(boot.Routes{
		API:          httpapi.NewRouter(application, log),
		OpenPrefixes: []string{},
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
