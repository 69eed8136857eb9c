package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthBody is what every service answers on GET /health.
type healthBody struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// waitHealthy polls GET base+"/health" until it answers 200, the process exits, another child
// fails, or ctx ends. Polling with a short, growing interval instead of sleeping a fixed time
// keeps start-up as fast as the slowest service and still gives migrations time to run.
func waitHealthy(ctx context.Context, client *http.Client, base string, p *process, failed <-chan struct{}) (version string, err error) {
	interval := 50 * time.Millisecond
	var last error
	for {
		version, err := probeHealth(ctx, client, base)
		if err == nil {
			return version, nil
		}
		last = err
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return "", fmt.Errorf("%s did not answer %s/health in time (last: %w)", p.spec.name, base, last)
			}
			return "", ctx.Err()
		case <-p.Done():
			timer.Stop()
			return "", fmt.Errorf("%s exited before it was healthy: %w", p.spec.name, cmp.Or(p.Err(), errors.New("exit status 0")))
		case <-failed:
			timer.Stop()
			return "", errors.New("another child failed during start-up")
		case <-timer.C:
		}
		interval = min(interval*2, 500*time.Millisecond)
	}
}

func probeHealth(ctx context.Context, client *http.Client, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	var h healthBody
	if err := json.Unmarshal(body, &h); err != nil {
		return "", fmt.Errorf("health body: %w", err)
	}
	return h.Version, nil
}

// checkPortFree fails when something already listens on addr. Without it a stale service from
// an earlier run would answer /health in place of the new one, and devstack would report a
// system that is not the one it just built.
func checkPortFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// freePort asks the kernel for a port nobody uses right now, for the private Postgres and Redis.
// Another process could take it before ours binds it; on a developer machine that race is rare
// and ends in a clear start-up error.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
