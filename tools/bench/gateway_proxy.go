package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// gatewayProxy measures what the gateway hop costs on an open route, one that skips the guard
// and the rate limit: the same request straight to identity, then through the gateway. The
// path is one identity does not serve, so it answers 404 JSON at once: the hop is the same for
// any answer, and a 404 keeps the backend's own work close to nothing so the difference is the
// gateway's.
type gatewayProxy struct{}

func (gatewayProxy) Name() string { return "gateway-proxy" }

const (
	proxyProbePath    = "/api/auth/bench-no-such-route"
	proxyPhaseDirect  = "direct to identity"
	proxyPhaseThrough = "through gateway"
)

func (g gatewayProxy) Run(ctx context.Context, env Env) ([]Result, error) {
	direct := Target{URL: env.IdentityURL + proxyProbePath, Expect: http.StatusNotFound}
	proxied := Target{URL: env.GatewayURL + proxyProbePath, Expect: http.StatusNotFound}

	env.Log("  direct  GET %s at %g/s", direct.URL, env.Rate)
	a, err := env.Generator.Run(ctx, env.phase(direct))
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	res := []Result{{Scenario: g.Name(), Phase: proxyPhaseDirect, Stats: a}}

	env.Log("  gateway GET %s at %g/s", proxied.URL, env.Rate)
	b, err := env.Generator.Run(ctx, env.phase(proxied))
	if err != nil {
		return res, fmt.Errorf("through gateway: %w", err)
	}
	res = append(res, Result{
		Scenario: g.Name(), Phase: proxyPhaseThrough, Stats: b,
		Note: fmt.Sprintf("gateway overhead (through gateway − direct): p50 %s ms, p99 %s ms",
			signedMillis(b.P50-a.P50), signedMillis(b.P99-a.P99)),
	})
	return res, nil
}

// signedMillis prints a difference of latencies in ms with its sign, so a faster second phase
// (noise) reads as such.
func signedMillis(d time.Duration) string {
	return fmt.Sprintf("%+.3f", float64(d)/float64(time.Millisecond))
}
