// Package redisx opens the traced Redis client of a service and names its keys under a
// prefix, so that several deployments or tests can share one Redis without touching each
// other's keys.
package redisx

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Open returns a client for url ("redis://host:port/db"). It does not wait for Redis to
// answer: services keep serving without it and say so on /ready.
// tp and mp may be nil (tests): the client is then not instrumented.
func Open(url string, tp trace.TracerProvider, mp metric.MeterProvider) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", errors.New("malformed SVC_REDIS_URL"))
	}
	c := redis.NewClient(opts)
	if tp != nil {
		// No caller file:line (a stack walk per command: 7% of the gateway's CPU) and no
		// statement text (commands carry keys and values, which traces should not).
		if err := redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(tp),
			redisotel.WithCallerEnabled(false), redisotel.WithDBStatement(false)); err != nil {
			return nil, fmt.Errorf("instrument redis: %w", err)
		}
	}
	if mp != nil {
		if err := redisotel.InstrumentMetrics(c, redisotel.WithMeterProvider(mp)); err != nil {
			return nil, fmt.Errorf("instrument redis: %w", err)
		}
	}
	return c, nil
}

// Keys builds key names under one prefix.
type Keys struct{ prefix string }

// NewKeys returns a Keys for prefix ("" is allowed).
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Key joins parts with ":" after the prefix.
func (k Keys) Key(parts ...string) string { return k.prefix + strings.Join(parts, ":") }

// Prefix is the prefix every key starts with.
func (k Keys) Prefix() string { return k.prefix }

// Check is the readiness probe of a client.
func Check(c *redis.Client) func(ctx context.Context) error {
	return func(ctx context.Context) error { return c.Ping(ctx).Err() }
}
