// Package service is the composition root of run-orchestrator: it reads the settings, builds the
// shared infrastructure, the engine and the service's ports, and serves them.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/libs/httpclient"
	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/run-orchestrator/internal/adapters/editorclient"
	"svc.dev/services/run-orchestrator/internal/adapters/postgres"
	"svc.dev/services/run-orchestrator/internal/adapters/redis"
	"svc.dev/services/run-orchestrator/internal/adapters/runevents"
	"svc.dev/services/run-orchestrator/internal/app"
	"svc.dev/services/run-orchestrator/internal/app/command"
	"svc.dev/services/run-orchestrator/internal/domain/run"
	"svc.dev/services/run-orchestrator/internal/ports/httpapi"
	"svc.dev/services/run-orchestrator/internal/ports/rpc"
	"svc.dev/services/run-orchestrator/migrations"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "run-orchestrator"

// needs says which stores run-orchestrator uses: Redis only when it caches snapshots (it reads
// the editor's catalog epochs there).
func needs(cache bool) boot.Needs { return boot.Needs{Postgres: true, Redis: cache} }

// Config is every setting run-orchestrator reads.
type Config struct {
	Addr      string
	EditorURL string
	// AllowPrivateNetwork sets http.request's hidden allow_private_network param
	// (SVC_HTTP_ALLOW_PRIVATE=1).
	AllowPrivateNetwork bool
	Workers             int
	// OrgCeiling is how many of a replica's workers one organization's runs may hold
	// (SVC_ORCHESTRATOR_ORG_MAX_IN_FLIGHT; 0, the default: all but one in twenty of Workers, at least one spare).
	OrgCeiling int
	// Heartbeat is how often the replica refreshes its heartbeat (SVC_ORCHESTRATOR_HEARTBEAT,
	// 1s); DeadAfter how old a heartbeat makes a replica dead (SVC_ORCHESTRATOR_DEAD_AFTER,
	// 5s). SweepEvery (tests only; default Heartbeat) is how often each replica looks for dead
	// replicas' work.
	Heartbeat, DeadAfter, SweepEvery time.Duration
	// Stream paces the event streams: SVC_ORCHESTRATOR_EVENTS_HEARTBEAT (15s) between
	// heartbeat comments; Recheck (tests only; 5s) between re-reads without a notification.
	Stream httpapi.StreamConfig
	// SnapshotCacheTTL is how long a workflow snapshot read from the editor may serve starts
	// while the organization's catalog epoch has not moved (SVC_ORCHESTRATOR_SNAPSHOT_CACHE_TTL,
	// 5s; 0: every start reads the editor, and Redis is not used).
	SnapshotCacheTTL time.Duration
	// Expressions are the budgets of an attempt's template and expression evaluations: the
	// full one's time (SVC_EXPRESSION_TIMEOUT, 1s) and bytes (SVC_EXPRESSION_MAX_BYTES, 16 MiB,
	// bounding both what its builtins allocate and what it produces); the small inline budget
	// of evaluations inside a transaction or a request keeps its defaults (run.EvalLimits).
	Expressions run.EvalLimits
	// AttemptOutputMax bounds an attempt's output JSON (SVC_ATTEMPT_OUTPUT_MAX_BYTES, 1 MiB:
	// the request body limit); RunOutputMax the run's sinks' outputs together
	// (SVC_RUN_OUTPUT_MAX_BYTES, 4 MiB, at least AttemptOutputMax). Zero takes the default.
	AttemptOutputMax, RunOutputMax int
	// Retention is how long finished runs are kept (SVC_RUN_RETENTION, 720h; an organization
	// may choose a shorter period). Every replica deletes the runs past it every SweepEvery
	// (SVC_RETENTION_SWEEP_INTERVAL, 1m), at most SweepBatch runs a transaction
	// (SVC_RETENTION_SWEEP_BATCH, 100) and SweepRate runs a second (SVC_RETENTION_SWEEP_RATE,
	// 2500; 0, as in a Config built by hand, does not pause).
	Retention, RetentionSweepEvery time.Duration
	RetentionSweepBatch            int
	RetentionSweepRate             int
	Base                           boot.Config
}

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr:                r.Addr("SVC_ORCHESTRATOR_ADDR", ":8083"),
		EditorURL:           r.URL("SVC_EDITOR_URL", "http://127.0.0.1:8082", "http", "https"),
		AllowPrivateNetwork: r.OneOf("SVC_HTTP_ALLOW_PRIVATE", "0", "0", "1") == "1",
		Workers:             r.Int("SVC_ORCHESTRATOR_WORKERS", 100, 1, 10000),
		OrgCeiling:          r.Int("SVC_ORCHESTRATOR_ORG_MAX_IN_FLIGHT", 0, 0, 10000),
		Heartbeat:           r.Duration("SVC_ORCHESTRATOR_HEARTBEAT", postgres.DefaultHeartbeat),
		DeadAfter:           r.Duration("SVC_ORCHESTRATOR_DEAD_AFTER", postgres.DefaultDeadAfter),
		Stream:              httpapi.StreamConfig{Heartbeat: r.Duration("SVC_ORCHESTRATOR_EVENTS_HEARTBEAT", 15*time.Second)},
		SnapshotCacheTTL:    r.Duration("SVC_ORCHESTRATOR_SNAPSHOT_CACHE_TTL", 5*time.Second),
		Expressions: run.EvalLimits{Full: expression.Limits{
			Timeout: r.Duration("SVC_EXPRESSION_TIMEOUT", run.DefaultTimeout),
			Bytes:   int64(r.Int("SVC_EXPRESSION_MAX_BYTES", run.DefaultMaxBytes, 1<<20, 1<<30)),
		}},
		AttemptOutputMax: r.Int("SVC_ATTEMPT_OUTPUT_MAX_BYTES", run.DefaultMaxAttemptOutput, minOutputMax, maxOutputMax),
		RunOutputMax:     r.Int("SVC_RUN_OUTPUT_MAX_BYTES", run.DefaultMaxRunOutput, minOutputMax, 4*maxOutputMax),

		Retention:           r.Duration("SVC_RUN_RETENTION", run.DefaultRetention),
		RetentionSweepEvery: r.Duration("SVC_RETENTION_SWEEP_INTERVAL", time.Minute),
		RetentionSweepBatch: r.Int("SVC_RETENTION_SWEEP_BATCH", 100, 1, 10000),
		RetentionSweepRate:  r.Int("SVC_RETENTION_SWEEP_RATE", 2500, 0, 1000000),
	}
	cfg.Base = boot.ReadConfig(r, needs(cfg.SnapshotCacheTTL > 0))
	err := r.Err()
	if cfg.Expressions.Full.Timeout <= 0 {
		err = errors.Join(err, fmt.Errorf("SVC_EXPRESSION_TIMEOUT (%s) must be positive", cfg.Expressions.Full.Timeout))
	}
	if cfg.Heartbeat <= 0 || cfg.DeadAfter < 2*cfg.Heartbeat {
		err = errors.Join(err, fmt.Errorf("SVC_ORCHESTRATOR_DEAD_AFTER (%s) must be at least twice SVC_ORCHESTRATOR_HEARTBEAT (%s), which must be positive",
			cfg.DeadAfter, cfg.Heartbeat))
	}
	if cfg.Retention < run.MinRetention || cfg.Retention > run.MaxRetention {
		err = errors.Join(err, fmt.Errorf("SVC_RUN_RETENTION (%s) must be from %s to %s", cfg.Retention, run.MinRetention, run.MaxRetention))
	}
	if cfg.RetentionSweepEvery < time.Second || cfg.RetentionSweepEvery > 24*time.Hour {
		err = errors.Join(err, fmt.Errorf("SVC_RETENTION_SWEEP_INTERVAL (%s) must be from 1s to 24h", cfg.RetentionSweepEvery))
	}
	if cfg.RunOutputMax < cfg.AttemptOutputMax {
		err = errors.Join(err, fmt.Errorf("SVC_RUN_OUTPUT_MAX_BYTES (%d) must be at least SVC_ATTEMPT_OUTPUT_MAX_BYTES (%d), so that a run's one sink always fits",
			cfg.RunOutputMax, cfg.AttemptOutputMax))
	}
	return cfg, err
}

// The range of the output bounds: at least room for an http.request's status and headers
// (64 KiB at most) beside its body; at most what a step may hold in memory and write in one row.
const (
	minOutputMax = 128 << 10
	maxOutputMax = 64 << 20
)

// ReplicaID names this process: a fresh time-ordered id, then host and pid for people.
func ReplicaID() string {
	host, _ := os.Hostname()
	if len(host) > 40 {
		host = host[:40]
	}
	return fmt.Sprintf("%s@%s/%d", wire.NewID(wire.Prefix("rep")), host, os.Getpid())
}

// Application is a started run-orchestrator.
type Application struct {
	base    *boot.Base
	engine  *runtime
	sweeper *sweeper
	addr    string
	handler http.Handler
}

// NewApplication connects the stores, applies migrations (ours with goose, River's with its
// migrator), starts the engine and assembles the HTTP surface.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (a *Application, err error) {
	// A Config built by hand (the tests) rather than by LoadConfig takes LoadConfig's defaults
	// for the retention sweep, which refuses zeros.
	cfg.Retention = cmp.Or(cfg.Retention, run.DefaultRetention)
	cfg.RetentionSweepEvery = cmp.Or(cfg.RetentionSweepEvery, time.Minute)
	cfg.RetentionSweepBatch = cmp.Or(cfg.RetentionSweepBatch, 100)
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Schema: postgres.Schema, Migrations: migrations.FS, Needs: needs(cfg.SnapshotCacheTTL > 0),
		// River's fetchers and workers and the API share the pool: pgx's default of 4
		// connections made every dispatch queue behind running steps.
		MaxConns: 32}, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			base.Close()
		}
	}()
	eng, err := newEngine(ctx, base.Pool, engineConfig{
		Replica: ReplicaID(),
		Workers: cfg.Workers, OrgCeiling: cfg.OrgCeiling, Connectors: connectors.Config{Log: log, AllowPrivateNetwork: cfg.AllowPrivateNetwork, MaxOutput: cfg.AttemptOutputMax},
		Limits:    run.Limits{AttemptOutput: cfg.AttemptOutputMax, RunOutput: cfg.RunOutputMax},
		Heartbeat: cfg.Heartbeat, DeadAfter: cfg.DeadAfter, SweepEvery: cfg.SweepEvery,
		Tracer: base.Tel.Tracer, Propagator: base.Tel.Propagator, Expressions: cfg.Expressions, Meter: base.Tel.Meter,
	}, log)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := eng.start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // the engine's workers and listener hold the pool: stop them before it closes
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = eng.stop(stopCtx)
		}
	}()
	hc := httpclient.New(httpclient.Config{Peer: "workflow-editor", BaseURL: cfg.EditorURL, Timeout: 5 * time.Second,
		Service: Name, Signer: base.Signer, Telemetry: base.Tel})
	catalog := editorclient.New(hc, connect.WithInterceptors(base.RPCInterceptors()...))
	var cache *command.SnapshotCache
	if cfg.SnapshotCacheTTL > 0 {
		// Redis only holds the catalog epochs: without it every start reads the editor, so its
		// outage marks the orchestrator degraded, not unready.
		base.Optional["redis"] = base.Checks["redis"]
		delete(base.Checks, "redis")
		cache = command.NewSnapshotCache(redis.NewRedisEpochs(base.Redis, base.Keys), cfg.SnapshotCacheTTL, 0, nil)
	}
	reader := postgres.NewRunReader(base.Pool)
	application, err := app.New(app.Config{Catalog: catalog, Engine: eng.engine, Reader: reader, Snapshots: reader, Waker: eng.hub,
		OrgStatuses: postgres.NewOrgStatusReader(base.Pool), Cache: cache, Retention: postgres.NewRetention(base.Pool),
		Sweep: command.SweepConfig{Server: cfg.Retention, Batch: cfg.RetentionSweepBatch, Budget: cfg.RetentionSweepEvery,
			Rate: cfg.RetentionSweepRate, Meter: base.Tel.Meter},
		Meter: base.Tel.Meter})
	if err != nil {
		return nil, err
	}
	sweeper := newSweeper(application.Commands.SweepRetention, cfg.RetentionSweepEvery, log)
	rpcPath, rpcHandler := orchestratorv1connect.NewOrchestratorServiceHandler(
		rpc.NewOrchestratorServer(application.Commands.StartRun, application.Commands.StartRuns), base.RPCHandlerOptions()...)
	handler := base.Handler(boot.Routes{
		API:          httpapi.NewRouter(httpapi.Handlers{App: application, Stream: cfg.Stream}, log),
		OpenPrefixes: []string{},
		RPC:          map[string]http.Handler{rpcPath: rpcHandler},
	})
	sweeper.start()
	return &Application{base: base, engine: eng, sweeper: sweeper, addr: cfg.Addr, handler: handler}, nil
}

// Replica is this process's replica id (replicas.id, step_attempts.replica).
func (a *Application) Replica() string { return a.engine.replica }

// Stopping is closed when the engine begins to shut down (Run's end, or Close).
func (a *Application) Stopping() <-chan struct{} { return a.engine.engine.Stopping() }

// Events is the feed of committed run changes this replica makes.
func (a *Application) Events() *runevents.Feed { return a.engine.feed }

// Handler is the whole HTTP surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// Run serves until ctx is done, then drains in-flight requests and lets the steps in flight
// commit before the engine stops.
func (a *Application) Run(ctx context.Context) error {
	err := a.base.Serve(ctx, a.addr, a.handler)
	a.sweeper.stop()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	return errors.Join(err, a.engine.stop(stopCtx))
}

// Close stops the engine (if Run did not) and releases the stores.
func (a *Application) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.sweeper.stop()
	_ = a.engine.stop(ctx)
	a.base.Close()
}
