package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/tools/bench/histload"
)

// sweep measures the retention sweep beside starts on its own: the scenario's organization
// gets -sweep-runs finished runs of months ago (histload), then the starts at 200/s run three
// times: before any sweep, while the orchestrator's sweeper deletes those runs (the
// organization set a period that puts them all past it), and after the period was reset and
// the sweep stopped. It reports the sweep's rate during its phase and the starts' p50, p90 and
// p99 against the two phases without it (target: ≥ 2,000 runs/s, p99 less than 20 % higher).
// On a database depth loaded, it measures the sweep at depth; depth ends with the same sweep
// phase, on its own organization's share of the load.
//
// It runs only when named (-scenario sweep): the load writes gigabytes.
type sweep struct{}

func (sweep) Name() string         { return "sweep" }
func (sweep) DefaultRate() float64 { return 200 }
func (sweep) ByNameOnly() bool     { return true }

func (s sweep) Run(ctx context.Context, env Env) ([]Result, error) {
	pool, err := pgxpool.New(ctx, env.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("setup: the system's database (-database-url): %w", err)
	}
	defer pool.Close()
	acct, keyed, err := signUpKeyed(ctx, env, s.Name())
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	d := &depthState{gateway: env.GatewayURL, org: acct.organizationID, began: time.Now()}
	if d.wfSmall, err = buildChain(ctx, keyed, "bench-sweep-2", 2); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	cfg := histload.Config{
		Runs:  env.SweepRuns,
		Orgs:  []histload.Org{{ID: d.org, Share: 1, Workflows: []string{d.wfSmall, "wf_other_a", "wf_other_b"}}},
		Span:  30 * 24 * time.Hour,
		Until: d.began.Add(-time.Hour),
		Log:   env.Log,
	}
	env.Log("  loading %d finished runs of the organization ...", cfg.Runs)
	st, err := histload.Load(ctx, pool, cfg)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	env.Log("  loaded %d runs, %d attempts in %s (%.0f runs/s)", st.Runs, st.Attempts, st.Took.Round(time.Second), st.Rate())
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE orchestrator.runs, orchestrator.step_attempts, orchestrator.run_statuses, orchestrator.idempotency_keys`); err != nil {
		return nil, fmt.Errorf("load: vacuum: %w", err)
	}
	if err := settleLoad(ctx, env, pool); err != nil {
		return nil, err
	}
	start := depthStart(env, acct, d.wfSmall)
	env.Log("  loaded: POST /run at %g/s", env.Rate)
	phase, err := env.Generator.Run(ctx, env.phase(start))
	if err != nil {
		return nil, err
	}
	out := []Result{{Scenario: s.Name(), Phase: "loaded: POST /run (202)", Stats: phase}}
	res, err := depthSweep(ctx, env, s.Name(), pool, d, acct, keyed)
	out = append(out, res...)
	if err != nil {
		return out, err
	}
	sweepFindings(out)
	return out, nil
}
