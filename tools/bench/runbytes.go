package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/clients/apiclient"
)

// runBytesScenario measures what a finished run costs on disk, per table of the orchestrator,
// for three shapes: a 2-block and a 10-block chain of no-op blocks (trigger.manual → log …,
// which end at their dispatch) and a 10-block chain with a 10 ms sleep in the middle (its
// second half goes through the queue: a wait, a timer, a River job). For each shape it starts
// rate × duration runs (each shape in an organization of its own), waits until every one is
// over, and divides the growth of each table (pg_total_relation_size: heap, TOAST and indexes,
// read after a VACUUM before and after) by the runs. River's completed jobs are counted while
// River keeps them (its retention, 5 minutes); a later measurement finds them gone.
//
// The sizes are differences on the database the system uses: on a fresh one they are the
// tables' growth, but space freed earlier in the same tables (rows deleted by an earlier
// shape, River's cleaner) is reused first and hides part of it. Run it alone on an empty
// database (a fresh SVC_DATABASE_URL, or -database-url with -no-system).
type runBytesScenario struct{}

func (runBytesScenario) Name() string         { return "run-bytes" }
func (runBytesScenario) DefaultRate() float64 { return 200 }

// historyTables are the orchestrator's tables a run leaves rows in; those a schema does not
// have (run_definitions before 0015) count 0.
var historyTables = []string{"runs", "run_definitions", "step_attempts", "run_blocks", "run_statuses", "waits", "signals", "idempotency_keys", "river_job"} //nolint:gochecknoglobals // a constant list

// runShape is a workflow to start: the operations that build it.
type runShape struct {
	name string
	ops  []map[string]any
}

// sleepChainOps is chainOps(n) with block b(n/2) a 10 ms sleep.
func sleepChainOps(n int) []map[string]any {
	ops := chainOps(n)
	mid := fmt.Sprintf("b%d", n/2)
	for _, op := range ops {
		if op["operation_type"] == "add" && op["block_id"] == mid {
			op["type"], op["params"] = "wait", map[string]any{"duration": "10ms"}
		}
	}
	return ops
}

func (s runBytesScenario) Run(ctx context.Context, env Env) ([]Result, error) {
	db, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("setup: the system's database (-database-url): %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	shapes := []runShape{
		{name: "2 blocks", ops: chainOps(2)},
		{name: "10 blocks", ops: chainOps(10)},
		{name: "10 blocks, a 10 ms sleep at the 6th (queued half)", ops: sleepChainOps(10)},
	}
	var out []Result
	for _, sh := range shapes {
		res, err := s.shape(ctx, env, db, sh)
		if err != nil {
			return out, fmt.Errorf("%s: %w", sh.name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func (s runBytesScenario) shape(ctx context.Context, env Env, db *pgx.Conn, sh runShape) (Result, error) {
	acct, keyed, err := signUpKeyed(ctx, env, s.Name())
	if err != nil {
		return Result{}, fmt.Errorf("setup: %w", err)
	}
	wf, err := createWorkflow(ctx, keyed, apiclient.CreateWorkflowRequest{Name: "bench-run-bytes"})
	if err != nil {
		return Result{}, fmt.Errorf("setup: %w", err)
	}
	if _, err := applyOps(ctx, keyed, wf.ID, sh.ops); err != nil {
		return Result{}, fmt.Errorf("setup: %w", err)
	}
	before, err := tableSizes(ctx, db)
	if err != nil {
		return Result{}, err
	}
	t := Target{
		Method: http.MethodPost,
		URL:    env.GatewayURL + "/api/workflows/" + wf.ID + "/run",
		Header: http.Header{"X-Api-Key": {acct.key}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"input": {"n": 42}}`),
		Expect: http.StatusAccepted,
		Check:  runStarted,
		Per:    "run",
	}
	env.Log("  %s: POST /run at %g/s for %s", sh.name, env.Rate, env.Duration)
	st, err := env.Generator.Run(ctx, Phase{Target: t, Rate: env.Rate, Duration: env.Duration})
	if err != nil {
		return Result{}, err
	}
	n, err := waitRunsOver(ctx, db, acct.organizationID, 2*time.Minute)
	if err != nil {
		return Result{}, err
	}
	after, err := tableSizes(ctx, db)
	if err != nil {
		return Result{}, err
	}
	var total int64
	parts := make([]string, 0, len(historyTables))
	for _, tbl := range historyTables {
		d := after[tbl] - before[tbl]
		total += d
		parts = append(parts, fmt.Sprintf("%s %d", tbl, d/int64(max(n, 1))))
	}
	env.Log("  %s: %d runs, %d bytes a run", sh.name, n, total/int64(max(n, 1)))
	return Result{
		Scenario: s.Name(), Phase: sh.name + ": POST /run (202)", Stats: st,
		Note: fmt.Sprintf("%s: %d runs over, **%d bytes a finished run** (pg_total_relation_size growth after VACUUM, per run: %s).",
			sh.name, n, total/int64(max(n, 1)), strings.Join(parts, ", ")),
	}, nil
}

// tableSizes vacuums the orchestrator's history tables and reads each one's total size (0 for
// one the schema does not have).
func tableSizes(ctx context.Context, db *pgx.Conn) (map[string]int64, error) {
	out := make(map[string]int64, len(historyTables))
	for _, tbl := range historyTables {
		var exists bool
		if err := db.QueryRow(ctx, `SELECT to_regclass('orchestrator.' || $1) IS NOT NULL`, tbl).Scan(&exists); err != nil {
			return nil, fmt.Errorf("size of %s: %w", tbl, err)
		}
		if !exists {
			continue
		}
		if _, err := db.Exec(ctx, `VACUUM orchestrator.`+pgx.Identifier{tbl}.Sanitize()); err != nil {
			return nil, fmt.Errorf("vacuum %s: %w", tbl, err)
		}
		var size int64
		if err := db.QueryRow(ctx, `SELECT pg_total_relation_size(('orchestrator.' || $1)::regclass)`, tbl).Scan(&size); err != nil {
			return nil, fmt.Errorf("size of %s: %w", tbl, err)
		}
		out[tbl] = size
	}
	return out, nil
}

// waitRunsOver waits until no run of org is queued, running or waiting, and returns how many
// runs it has.
func waitRunsOver(ctx context.Context, db *pgx.Conn, org string, limit time.Duration) (int, error) {
	var all, live int
	err := pollUntil(ctx, 200*time.Millisecond, limit, func() (bool, error) {
		if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status IN ('queued', 'running', 'waiting'))
			FROM orchestrator.runs WHERE organization_id = $1`, org).Scan(&all, &live); err != nil {
			return false, fmt.Errorf("count runs: %w", err)
		}
		return live == 0, nil
	})
	switch {
	case errors.Is(err, errNotWithin):
		return 0, fmt.Errorf("%d of %d runs still going after %s", live, all, limit)
	case err != nil:
		return 0, err
	}
	return all, nil
}
