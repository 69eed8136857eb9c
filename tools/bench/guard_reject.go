package main

import (
	"context"
	"fmt"
	"net/http"
)

// guardReject measures the guard's round trip to identity: a guarded route with a bearer token
// that identity's Resolve RPC rejects, so every request costs the gateway one RPC and ends in
// 401 before any backend sees it.
type guardReject struct{}

func (guardReject) Name() string { return "guard-reject" }

func (g guardReject) Run(ctx context.Context, env Env) ([]Result, error) {
	t := Target{
		URL:    env.GatewayURL + "/api/workflows",
		Header: http.Header{"Authorization": {"Bearer bench-invalid"}},
		Expect: http.StatusUnauthorized,
	}
	env.Log("  GET %s (invalid bearer) at %g/s", t.URL, env.Rate)
	st, err := env.Generator.Run(ctx, env.phase(t))
	if err != nil {
		return nil, fmt.Errorf("reject: %w", err)
	}
	return []Result{{Scenario: g.Name(), Phase: "invalid bearer → 401", Stats: st}}, nil
}
