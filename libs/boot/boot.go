// Package boot is the start-up every service shares: the common settings, telemetry, the
// Postgres pool migrated into the service's schema, Redis, the identity signer, the /health
// and /ready endpoints, the guarded /api prefix, and a server that drains on SIGTERM. Each
// service's composition root calls it and then adds its own routes and RPCs.
package boot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"svc.dev/libs/buildinfo"
	"svc.dev/libs/env"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/pgdb"
	"svc.dev/libs/redisx"
	"svc.dev/libs/telemetry"
	"svc.dev/libs/web"
)

// Needs says which stores a service uses.
type Needs struct {
	Postgres bool
	Redis    bool
}

// Config holds the settings every service reads.
type Config struct {
	DatabaseURL string
	// DatabaseMaxConns overrides the pool size the service asks for (0: the service's own).
	DatabaseMaxConns int
	RedisURL         string
	RedisPrefix      string
	InternalSecret   string
	LogLevel         slog.Level
	Drain            time.Duration
	// PprofAddr, when set, serves net/http/pprof there (a separate listener: never on a
	// public port).
	PprofAddr string
}

// ReadConfig reads the common settings; failures are collected in r.
func ReadConfig(r *env.Reader, needs Needs) Config {
	c := Config{
		InternalSecret: r.Secret("SVC_INTERNAL_SECRET", 32),
		Drain:          r.Duration("SVC_SHUTDOWN_TIMEOUT", 20*time.Second),
		RedisPrefix:    r.String("SVC_REDIS_PREFIX", "svc:"),
		PprofAddr:      r.String("SVC_PPROF_ADDR", ""),
	}
	if needs.Postgres {
		c.DatabaseMaxConns = r.Int("SVC_DATABASE_MAX_CONNS", 0, 0, 1000)
		c.DatabaseURL = r.URL("SVC_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres", "postgresql")
	}
	if needs.Redis {
		c.RedisURL = r.URL("SVC_REDIS_URL", "redis://127.0.0.1:6379/0", "redis", "rediss")
	}
	c.LogLevel, _ = telemetry.ParseLevel(r.OneOf("SVC_LOG_LEVEL", "info", "debug", "info", "warn", "error"))
	return c
}

// Spec is what a service brings to Start.
type Spec struct {
	// Name is the service's name in logs, spans and pg_stat_activity.
	Name string
	// Schema and Migrations are the service's own Postgres schema and its embedded goose files.
	Schema     string
	Migrations fs.FS
	Needs      Needs
	// MaxConns is the pool size the service needs (0: pgx's default, the larger of 4 and the
	// number of CPUs). SVC_DATABASE_MAX_CONNS overrides it.
	MaxConns int32
}

// Base is a started service's shared infrastructure.
type Base struct {
	Name   string
	Log    *slog.Logger
	Tel    telemetry.Telemetry
	Pool   *pgxpool.Pool
	Redis  *redis.Client
	Keys   redisx.Keys
	Signer internalauth.Signer
	// Checks must pass for /ready to answer 200; a failing Optional check only marks the
	// service degraded.
	Checks   map[string]web.Check
	Optional map[string]web.Check
	drain    time.Duration
	pprof    *http.Server
}

// DefaultGCPercent is the collector's target a service runs with when GOGC is not set. The
// services' live heaps are tens of MB, and the per-request garbage is what drives the
// collector. At 200 starts/s, marking was 5 % of the gateway's CPU samples and 10 % of the
// orchestrator's (tools/bench; bench/RESULTS.md). Letting the heap grow to 3× the live heap
// instead of 2× runs the collector half as often.
const DefaultGCPercent = 200

// Start builds telemetry, opens and migrates Postgres and opens Redis as spec asks.
func Start(ctx context.Context, cfg Config, spec Spec, log *slog.Logger) (b *Base, err error) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
	signer, err := internalauth.NewSigner(cfg.InternalSecret)
	if err != nil {
		return nil, fmt.Errorf("SVC_INTERNAL_SECRET: %w", err)
	}
	tel, err := telemetry.New(ctx, spec.Name, buildinfo.Version())
	if err != nil {
		return nil, err
	}
	b = &Base{Name: spec.Name, Log: log, Tel: tel, Signer: signer, Checks: map[string]web.Check{}, Optional: map[string]web.Check{}, drain: cfg.Drain}
	started := b // every error return sets the named result to nil
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	if cfg.PprofAddr != "" {
		if b.pprof, err = servePprof(cfg.PprofAddr, log); err != nil {
			return nil, err
		}
	}
	if spec.Needs.Postgres {
		maxConns := spec.MaxConns
		if cfg.DatabaseMaxConns > 0 {
			maxConns = int32(cfg.DatabaseMaxConns) //nolint:gosec // bounded to 1000 by ReadConfig
		}
		b.Pool, err = pgdb.Open(ctx, pgdb.Config{URL: cfg.DatabaseURL, Schema: spec.Schema, Service: spec.Name, MaxConns: maxConns, Tracer: tel.Tracer})
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if err := pgdb.Migrate(ctx, b.Pool, spec.Schema, spec.Migrations, log); err != nil {
			return nil, err
		}
		b.Checks["postgres"] = pgdb.Check(b.Pool)
		if err := otelpgx.RecordStats(b.Pool, otelpgx.WithStatsMeterProvider(tel.Meter)); err != nil {
			return nil, fmt.Errorf("pool metrics: %w", err)
		}
	}
	if spec.Needs.Redis {
		b.Redis, err = redisx.Open(cfg.RedisURL, tel.Tracer, tel.Meter)
		if err != nil {
			return nil, err
		}
		b.Keys = redisx.NewKeys(cfg.RedisPrefix)
		b.Checks["redis"] = redisx.Check(b.Redis)
	}
	return b, nil
}

// Routes is what a service serves behind the shared endpoints.
type Routes struct {
	// API serves /api/...; every path is guarded (signed identity required) except those
	// OpenPrefixes lets through: a prefix ending in "/" opens every path below it, any other
	// opens exactly that path.
	API          http.Handler
	OpenPrefixes []string
	// RPC maps Connect path prefixes ("/identity.v1.IdentityService/") to their handlers;
	// every RPC requires a signed caller.
	RPC map[string]http.Handler
}

// Handler assembles the service's whole HTTP surface: /health and /ready open, RPCs and
// guarded /api paths behind the identity check, everything else a JSON 404.
func (b *Base) Handler(routes Routes) http.Handler {
	mux := web.NewRouter()
	mux.Handle("/health", web.Health(buildinfo.Version())).Methods(http.MethodGet, http.MethodHead)
	mux.Handle("/ready", web.ReadyWithOptional(2*time.Second, b.Checks, b.Optional)).Methods(http.MethodGet, http.MethodHead)
	mux.Handle("/metrics", b.Tel.Metrics).Methods(http.MethodGet)
	require := b.Signer.Require(time.Now)
	for prefix, h := range routes.RPC {
		mux.PathPrefix(prefix).Handler(require(h))
	}
	api := routes.API
	if api == nil {
		api = http.HandlerFunc(web.NotFound)
	}
	guarded := require(api)
	mux.PathPrefix("/api/").Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range routes.OpenPrefixes {
			// "/api/auth/" opens everything below it; "/api/bootstrap" only itself.
			if r.URL.Path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(r.URL.Path, p)) {
				api.ServeHTTP(w, r)
				return
			}
		}
		guarded.ServeHTTP(w, r)
	}))
	// Internal RPCs read more than public routes (web.MaxRPCBodyBytes): a start carries what a
	// public request brought plus its own members.
	public, internal := web.BodyLimit(web.MaxBodyBytes)(mux), web.BodyLimit(web.MaxRPCBodyBytes)(mux)
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for prefix := range routes.RPC {
			if strings.HasPrefix(r.URL.Path, prefix) {
				internal.ServeHTTP(w, r)
				return
			}
		}
		public.ServeHTTP(w, r)
	})
	return web.Chain(limited, web.Edge(b.Log, b.Tel, b.Name)...)
}

// Serve listens on addr and serves h until ctx is done, then drains.
func (b *Base) Serve(ctx context.Context, addr string, h http.Handler) error {
	return b.ServeAll(ctx, Surface{Addr: addr, Handler: h})
}

// Surface is one address a process serves and its handler.
type Surface struct {
	Addr    string
	Handler http.Handler
}

// ServeAll binds every surface, in order, before it serves any, so a probe that reaches one
// (the gateway's admin /health) knows the others accept connections too. It serves until ctx
// is done or one server fails, then stops and drains them all.
func (b *Base) ServeAll(ctx context.Context, surfaces ...Surface) error {
	servers := make([]*web.Server, 0, len(surfaces))
	for _, s := range surfaces {
		srv, err := web.Listen(s.Addr, s.Handler, b.Log, b.drain)
		if err != nil {
			for _, bound := range servers {
				bound.Close()
			}
			return err
		}
		servers = append(servers, srv)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		b.Log.InfoContext(ctx, "listening", "addr", srv.Addr(), "version", buildinfo.Version())
		go func() { errc <- srv.Serve(ctx) }()
	}
	errs := make([]error, 0, len(servers))
	for range servers {
		errs = append(errs, <-errc)
		cancel()
	}
	return errors.Join(errs...)
}

// Close releases pools and flushes spans.
func (b *Base) Close() {
	if b.pprof != nil {
		_ = b.pprof.Close()
	}
	if b.Pool != nil {
		b.Pool.Close()
	}
	if b.Redis != nil {
		_ = b.Redis.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Tel.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		b.Log.Warn("flush spans", "err", err)
	}
}

// RPCInterceptors are the Connect interceptors of every internal API: a span per call that
// continues the caller's trace (callers are other services of this system, so their trace
// context is trusted).
func (b *Base) RPCInterceptors() []connect.Interceptor {
	return RPCInterceptors(b.Tel)
}

// RPCHandlerOptions are the options of every internal API's handler: the interceptors, and
// answers under 64 KiB sent uncompressed. Callers are services of this system on the same
// network; gzip of the editor's small snapshots took 15% of its CPU under the run-start
// benchmark and saved nothing that matters on a local link.
func (b *Base) RPCHandlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithInterceptors(b.RPCInterceptors()...), connect.WithCompressMinBytes(64 << 10)}
}

// RPCInterceptors builds the tracing interceptor for tel, for servers and clients alike.
func RPCInterceptors(tel telemetry.Telemetry) []connect.Interceptor {
	ic, err := otelconnect.NewInterceptor(
		otelconnect.WithTracerProvider(tel.Tracer),
		otelconnect.WithPropagator(tel.Propagator),
		otelconnect.WithMeterProvider(tel.Meter),
		otelconnect.WithTrustRemote(),
	)
	if err != nil {
		panic(fmt.Sprintf("otelconnect: %v", err)) // only fails on bad options, a programmer error
	}
	return []connect.Interceptor{ic}
}
