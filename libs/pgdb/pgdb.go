// Package pgdb opens the Postgres pool of a service inside that service's own schema, applies
// the service's embedded goose migrations once even when many replicas start together, and
// runs functions inside a transaction that commits or rolls back in one place.
package pgdb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/libs/telemetry"
)

// Config says where the pool points and whose schema it works in.
type Config struct {
	URL    string
	Schema string
	// Service names the connections in pg_stat_activity.
	Service string
	// MaxConns overrides the pool size when positive.
	MaxConns int32
	Tracer   trace.TracerProvider
}

// Open returns a pool whose connections resolve unqualified names in cfg.Schema only, so a
// service's SQL cannot read another service's tables by accident.
func Open(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", errors.New("malformed SVC_DATABASE_URL"))
	}
	pc.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	if cfg.Service != "" {
		pc.ConnConfig.RuntimeParams["application_name"] = cfg.Service
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if cfg.Tracer != nil {
		pc.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(telemetry.ChildSpansOnly(cfg.Tracer)), otelpgx.WithDisableAcquireTracer())
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// Migrate creates schema if needed and applies every pending migration of fsys to it. A
// session advisory lock keyed by the schema name serialises replicas that start together: the
// first applies, the others wait and then find nothing to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string, fsys fs.FS, log *slog.Logger) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: acquire: %w", schema, err)
	}
	defer conn.Release()

	lockID := LockID("migrate:" + schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", schema, err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID); uerr != nil {
			// The lock dies with the session; make sure the session dies too.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			err = errors.Join(err, fmt.Errorf("migrate %s: unlock: %w", schema, uerr))
		}
	}()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("migrate %s: create schema: %w", schema, err)
	}

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	for _, r := range results {
		log.InfoContext(ctx, "migration applied", "schema", schema, "version", r.Source.Version,
			"file", r.Source.Path, "duration_ms", r.Duration.Milliseconds())
	}
	return nil
}

// LockID maps a name onto a Postgres advisory lock key.
func LockID(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64()) //nolint:gosec // any 64-bit value is a valid key; wrap-around is fine
}

// InTx runs f in a transaction: committed when f returns nil, rolled back otherwise.
func InTx(ctx context.Context, pool *pgxpool.Pool, f func(tx pgx.Tx) error) (err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return
		}
		if cerr := tx.Commit(ctx); cerr != nil {
			err = fmt.Errorf("commit: %w", cerr)
		}
	}()
	return f(tx)
}

// Check is the readiness probe of a pool.
func Check(pool *pgxpool.Pool) func(ctx context.Context) error {
	return func(ctx context.Context) error { return pool.Ping(ctx) }
}
