package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// cache is the Redis the services use, and how to let go of it.
type cache struct {
	url      string
	source   string                          // for humans: where it came from
	embedded bool                            // miniredis: in this process, not a real server
	close    func(ctx context.Context) error // stops a server devstack started; no-op otherwise
}

// resolveRedis finds a Redis: SVC_REDIS_URL, then the standard local server, then a private
// redis-server, then an embedded miniredis. Redis only holds rate-limit buckets and webhook
// idempotency keys (the orchestrator's table is the backstop), so an in-process stand-in is
// good enough to click through the system, and beats refusing to start.
func resolveRedis(ctx context.Context, cfg config, env map[string]string, sup *supervisor, log *slog.Logger) (*cache, error) {
	noop := func(context.Context) error { return nil }

	if u, ok := env[envRedisURL]; ok {
		if err := pingRedis(ctx, u, 3*time.Second); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%s does not answer (%s): %w", envRedisURL, redactURL(u), err)
		}
		return &cache{url: u, source: envRedisURL, close: noop}, nil
	}

	local := "redis://" + cfg.redisAddr + "/0"
	err := pingRedis(ctx, local, time.Second)
	if err == nil {
		return &cache{url: local, source: "local server on " + cfg.redisAddr, close: noop}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	log.Info("no Redis on the standard port", "addr", cfg.redisAddr, "err", err)

	if path, err := cfg.lookPath("redis-server"); err == nil {
		return startRedisServer(ctx, path, filepath.Join(cfg.stateDir, "redis"), sup)
	}
	log.Info("no redis-server on PATH; using an embedded miniredis")
	return startMiniredis()
}

func pingRedis(ctx context.Context, redisURL string, timeout time.Duration) error {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	// A plain dial first: when nothing listens (the common case while probing), go-redis would
	// retry the dial and print its own log line about it on every probe.
	if opts.Network == "tcp" {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", opts.Addr)
		if err != nil {
			return err
		}
		_ = conn.Close()
	}
	// Probing must fail fast: no retries, one connection.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.PoolSize = 1
	opts.DialTimeout = timeout
	client := redis.NewClient(opts)
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return client.Ping(ctx).Err()
}

// startRedisServer runs a private, memory-only redis-server: nothing in it needs to outlive the
// run, and with persistence off it never writes dump files into the repository.
func startRedisServer(ctx context.Context, path, dir string, sup *supervisor) (*cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	proc, err := sup.start(procSpec{
		name: "redis",
		path: path,
		args: []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
		},
		dir: dir,
	})
	if err != nil {
		return nil, err
	}
	closeFunc := proc.stop

	redisURL := "redis://" + addr + "/0"
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := pingRedis(waitCtx, redisURL, time.Second)
		if err == nil {
			break
		}
		select {
		case <-proc.Done():
			return nil, fmt.Errorf("redis-server exited during start-up: %w", cmp.Or(proc.Err(), errors.New("exit status 0")))
		case <-waitCtx.Done():
			return nil, errors.Join(fmt.Errorf("redis-server did not answer in time: %w", err),
				closeFunc(context.WithoutCancel(ctx)))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return &cache{url: redisURL, source: "private redis-server on " + addr, close: closeFunc}, nil
}

// startMiniredis serves Redis from inside devstack.
func startMiniredis() (*cache, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded miniredis: %w", err)
	}
	return &cache{
		url:      "redis://" + m.Addr() + "/0",
		source:   "embedded miniredis on " + m.Addr(),
		embedded: true,
		close: func(context.Context) error {
			m.Close()
			return nil
		},
	}, nil
}
