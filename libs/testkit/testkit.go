// Package testkit gives each test its own real Postgres database or schema and its own Redis
// key prefix, and removes them when the test ends. It uses SVC_TEST_DATABASE_URL and
// SVC_TEST_REDIS_URL when set (CI sets them) and the local servers on their standard ports
// otherwise. Tests that need them are skipped under -short (make test/unit) and fail loudly,
// never skip, when the servers do not answer.
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/redisx"
)

// The servers used when the environment names none.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// Name returns a fresh lowercase name with prefix, safe as a database, schema or key prefix.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

func integration(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: needs Postgres and Redis (run without -short)")
	}
}

// DatabaseURL is the admin URL of the test Postgres server.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	integration(tb)
	if u := os.Getenv("SVC_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// RedisURL is the URL of the test Redis server.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	integration(tb)
	if u := os.Getenv("SVC_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return c
}

// NewDatabase creates an empty database for this test and returns its URL; the database is
// dropped, with any connections still open to it, when the test ends.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	admin := DatabaseURL(tb)
	name := Name("svctest")
	conn, err := pgx.Connect(ctx(tb), admin)
	if err != nil {
		tb.Fatalf("testkit: Postgres at %s does not answer (%v); set SVC_TEST_DATABASE_URL", redact(admin), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx(tb), "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("testkit: create database: %v", err)
	}
	tb.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			tb.Errorf("testkit: drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("testkit: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("testkit: bad database url: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewSchema opens a pool on a fresh schema of the test database, applies migrations to it
// (when given) and drops the schema when the test ends. It is what adapter tests use.
func NewSchema(tb testing.TB, migrations fs.FS) *pgxpool.Pool {
	tb.Helper()
	admin := DatabaseURL(tb)
	schema := Name("t")
	pool, err := pgdb.Open(ctx(tb), pgdb.Config{URL: admin, Schema: schema, Service: "testkit", MaxConns: 8})
	if err != nil {
		tb.Fatalf("testkit: Postgres at %s does not answer (%v); set SVC_TEST_DATABASE_URL", redact(admin), err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			tb.Errorf("testkit: drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	if migrations != nil {
		if err := pgdb.Migrate(ctx(tb), pool, schema, migrations, slog.New(slog.DiscardHandler)); err != nil {
			tb.Fatalf("testkit: migrate: %v", err)
		}
	} else if _, err := pool.Exec(ctx(tb), "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("testkit: create schema: %v", err)
	}
	return pool
}

// NewRedis returns a client of the test Redis and a key prefix of this test's own; keys under
// the prefix are deleted when the test ends.
func NewRedis(tb testing.TB) (*redis.Client, redisx.Keys) {
	tb.Helper()
	u := RedisURL(tb)
	c, err := redisx.Open(u, nil, nil)
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	if err := c.Ping(ctx(tb)).Err(); err != nil {
		tb.Fatalf("testkit: Redis at %s does not answer (%v); set SVC_TEST_REDIS_URL", redact(u), err)
	}
	keys := redisx.NewKeys(Name("t") + ":")
	tb.Cleanup(func() {
		bg := context.Background()
		iter := c.Scan(bg, 0, keys.Prefix()+"*", 500).Iterator()
		for iter.Next(bg) {
			c.Del(bg, iter.Val())
		}
		if err := iter.Err(); err != nil {
			tb.Errorf("testkit: clean redis keys: %v", err)
		}
		_ = c.Close()
	})
	return c, keys
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return strings.Replace(u.Redacted(), "xxxxx", "***", 1)
}
