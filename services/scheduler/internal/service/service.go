// Package service is the composition root of scheduler: it reads the settings, builds the
// shared infrastructure and the service's ports, runs the built-in ticker, and serves.
package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/libs/httpclient"
	"svc.dev/services/scheduler/internal/adapters/editorclient"
	"svc.dev/services/scheduler/internal/adapters/orchestratorclient"
	"svc.dev/services/scheduler/internal/adapters/postgres"
	"svc.dev/services/scheduler/internal/app"
	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/ports/httpapi"
	"svc.dev/services/scheduler/migrations"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "scheduler"

// DefaultTick is how often the built-in ticker fires what is due (SVC_SCHEDULER_TICK overrides it).
const DefaultTick = 10 * time.Second

// needs says which stores scheduler uses.
func needs() boot.Needs { return boot.Needs{Postgres: true, Redis: false} }

// Config is every setting scheduler reads.
type Config struct {
	Addr            string
	EditorURL       string
	OrchestratorURL string
	// Tick is the built-in ticker's interval (SVC_SCHEDULER_TICK); 0 disables it.
	Tick time.Duration
	// TickSizes sizes each tick's transactions (tests and benchmarks only; zero: defaults).
	TickSizes command.TickConfig
	// Now is the clock (tests only; nil: time.Now).
	Now  func() time.Time
	Base boot.Config
}

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr:            r.Addr("SVC_SCHEDULER_ADDR", ":8084"),
		EditorURL:       r.URL("SVC_EDITOR_URL", "http://127.0.0.1:8082", "http", "https"),
		OrchestratorURL: r.URL("SVC_ORCHESTRATOR_URL", "http://127.0.0.1:8083", "http", "https"),
		Tick:            r.Duration("SVC_SCHEDULER_TICK", DefaultTick),
		Base:            boot.ReadConfig(r, needs()),
	}
	return cfg, r.Err()
}

// Application is a started scheduler.
type Application struct {
	base    *boot.Base
	app     app.Application
	addr    string
	tick    time.Duration
	handler http.Handler
}

// NewApplication connects the stores, applies migrations and assembles the HTTP surface.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (*Application, error) {
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Schema: "scheduler", Migrations: migrations.FS, Needs: needs(),
		// A tick holds a connection per dispatch worker and one for claims, beside the API's.
		MaxConns: 16}, log)
	if err != nil {
		return nil, err
	}
	interceptors := connect.WithInterceptors(base.RPCInterceptors()...)
	editor := editorclient.New(httpclient.New(httpclient.Config{Peer: "workflow-editor", BaseURL: cfg.EditorURL, Timeout: 5 * time.Second,
		Service: Name, Signer: base.Signer, Telemetry: base.Tel}), interceptors)
	orchestrator := orchestratorclient.New(httpclient.New(httpclient.Config{Peer: "run-orchestrator", BaseURL: cfg.OrchestratorURL,
		Timeout: 10 * time.Second, Service: Name, Signer: base.Signer, Telemetry: base.Tel}), interceptors)
	sizes := command.DefaultTickConfig()
	if cfg.TickSizes != (command.TickConfig{}) {
		sizes = cfg.TickSizes
	}
	sizes.Meter = base.Tel.Meter
	repo := postgres.NewScheduleRepository(base.Pool)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	application := app.New(repo, repo, editor, orchestrator, sizes, now, log)
	handler := base.Handler(boot.Routes{
		API:          httpapi.NewRouter(application, log),
		OpenPrefixes: []string{},
	})
	return &Application{base: base, app: application, addr: cfg.Addr, tick: cfg.Tick, handler: handler}, nil
}

// Handler is the whole HTTP surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// Run serves and ticks until ctx is done, then drains in-flight requests and lets a tick in
// progress finish.
func (a *Application) Run(ctx context.Context) error {
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunTicker(tctx)
	}()
	err := a.base.Serve(ctx, a.addr, a.handler)
	cancel()
	<-done
	return err
}

// RunTicker fires what is due every SVC_SCHEDULER_TICK until ctx is done; ticks never overlap
// within a replica. It returns at once when the ticker is disabled.
func (a *Application) RunTicker(ctx context.Context) {
	if a.tick <= 0 {
		return
	}
	log := a.base.Log
	t := time.NewTicker(a.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A tick in progress finishes even when shutdown starts: its claims are committed and
		// their dispatch should not be cut in half (a cut one would be retried anyway).
		tickCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		if _, err := a.app.Commands.Tick.Handle(tickCtx); err != nil && !errors.Is(err, context.Canceled) {
			log.ErrorContext(ctx, "tick failed", "err", err)
		}
		cancel()
	}
}

// Close releases the stores.
func (a *Application) Close() { a.base.Close() }
