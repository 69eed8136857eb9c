package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/clients/apiclient"
	"svc.dev/libs/wire"
	"svc.dev/tools/bench/histload"
)

// depth measures the API on an empty database and again once it holds millions of finished
// runs (-depth-runs, 5 million by default), in one run: starts at 200/s, GET /api/runs/:id, the
// first and a deep page of GET /api/runs (by organization, ?workflowId=, ?status=), a page of
// logs and the organization's stream's connect. Target: every latency of the loaded database
// within 1.2× of the empty one's.
//
// The empty database is the one the system starts on (use a fresh one: SVC_DATABASE_URL, or
// -database-url with -no-system). The scenario starts its own runs there first (the start
// phase), so the lists have pages to walk; then histload fills the database with finished runs
// older than those, a fifth of them the scenario's own organization's (on its two workflows
// and four made-up ones) and the rest spread over three large and two hundred small
// organizations, and the same requests are measured again. A deep page is reached by a cursor
// on the run at the middle of the list (at most 500,000 runs down), as a client paging that far
// would hold; bench makes the cursor itself (wire's cursor encoding). A database that already
// holds -depth-runs runs is not loaded again.
//
// It runs only when named (-scenario depth): the load writes gigabytes.
type depth struct{}

func (depth) Name() string         { return "depth" }
func (depth) DefaultRate() float64 { return 200 }
func (depth) ByNameOnly() bool     { return true }

// depthReadRate is the rate of each read phase.
const depthReadRate = 100

// depthTarget is one request the scenario measures on both databases.
type depthTarget struct {
	name string
	url  func(d *depthState) string
}

// depthState is what the targets need of the database as it stands.
type depthState struct {
	gateway, org, wfSmall, wfLarge string
	runID                          string    // a finished run of wfLarge
	began                          time.Time // before the scenario's first run
	deepOrg, deepWf, deepStatus    string    // cursors
	deepFailed                     string
}

func (d *depthState) list(q url.Values) string { return d.gateway + "/api/runs?" + q.Encode() }

func depthTargets() []depthTarget {
	return []depthTarget{
		{"GET /api/runs/:id", func(d *depthState) string { return d.gateway + "/api/runs/" + d.runID }},
		{"GET /api/runs/:id?include=workflow", func(d *depthState) string { return d.gateway + "/api/runs/" + d.runID + "?include=workflow" }},
		{"GET /api/runs/:id/logs", func(d *depthState) string { return d.gateway + "/api/runs/" + d.runID + "/logs" }},
		{"list by organization, first page", func(d *depthState) string { return d.list(url.Values{}) }},
		{"list by organization, deep page", func(d *depthState) string { return d.list(url.Values{"after": {d.deepOrg}}) }},
		{"list ?workflowId=, first page", func(d *depthState) string { return d.list(url.Values{"workflowId": {d.wfLarge}}) }},
		{"list ?workflowId=, deep page", func(d *depthState) string {
			return d.list(url.Values{"workflowId": {d.wfLarge}, "after": {d.deepWf}})
		}},
		{"list ?status=completed, first page", func(d *depthState) string { return d.list(url.Values{"status": {"completed"}}) }},
		{"list ?status=completed, deep page", func(d *depthState) string {
			return d.list(url.Values{"status": {"completed"}, "after": {d.deepStatus}})
		}},
		{"list ?status=failed, first page", func(d *depthState) string { return d.list(url.Values{"status": {"failed"}}) }},
		{"list ?status=failed, deep page", func(d *depthState) string {
			return d.list(url.Values{"status": {"failed"}, "after": {d.deepFailed}})
		}},
	}
}

func (s depth) Run(ctx context.Context, env Env) ([]Result, error) {
	pool, err := pgxpool.New(ctx, env.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("setup: the system's database (-database-url): %w", err)
	}
	defer pool.Close()
	acct, keyed, err := signUpKeyed(ctx, env, s.Name())
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	d := &depthState{gateway: env.GatewayURL, org: acct.organizationID}
	if d.wfSmall, err = buildChain(ctx, keyed, "bench-depth-2", 2); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if d.wfLarge, err = buildChain(ctx, keyed, "bench-depth-10", 10); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	d.began = time.Now()
	// Runs of the larger workflow, some failed (a cancel of a run that ended at dispatch is
	// refused, so the failures are started as such: an input the trigger refuses is a 400, not
	// a run; the failed ones come from the load alone).
	for range 200 {
		if _, err := startRun(ctx, keyed, d.wfLarge); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}
	var out []Result
	for _, stage := range []string{"empty", "loaded"} {
		if stage == "loaded" {
			if err := depthLoad(ctx, env, pool, d); err != nil {
				return out, err
			}
		}
		res, err := depthMeasure(ctx, env, pool, d, acct, stage)
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	res, err := depthSweep(ctx, env, s.Name(), pool, d, acct, keyed)
	out = append(out, res...)
	if err != nil {
		return out, err
	}
	return out, depthFindings(out)
}

// depthLoad fills the database unless it already holds env.DepthRuns runs.
func depthLoad(ctx context.Context, env Env, pool *pgxpool.Pool, d *depthState) error {
	var have int64
	if err := pool.QueryRow(ctx, `SELECT reltuples::bigint FROM pg_class WHERE oid = 'orchestrator.runs'::regclass`).Scan(&have); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if have >= int64(env.DepthRuns) {
		env.Log("  the database holds about %d runs already: not loaded again", have)
		return nil
	}
	var oldest time.Time
	if err := pool.QueryRow(ctx, `SELECT min(created_at) FROM orchestrator.runs WHERE organization_id = $1`, d.org).Scan(&oldest); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	cfg := histload.Config{
		Runs:  env.DepthRuns,
		Orgs:  []histload.Org{{ID: d.org, Share: 0.2, Workflows: []string{d.wfLarge, d.wfSmall, "wf_other_a", "wf_other_b", "wf_other_c", "wf_other_d"}}},
		Until: oldest.Add(-time.Second),
		Log:   env.Log,
	}
	env.Log("  loading %d finished runs ...", cfg.Runs)
	st, err := histload.Load(ctx, pool, cfg)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	env.Log("  loaded %d runs, %d attempts, %d statuses, %d keys in %s (%.0f runs/s)", st.Runs, st.Attempts, st.Statuses, st.Keys,
		st.Took.Round(time.Second), st.Rate())
	began := time.Now()
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE orchestrator.runs, orchestrator.step_attempts, orchestrator.run_statuses, orchestrator.idempotency_keys`); err != nil {
		return fmt.Errorf("load: vacuum: %w", err)
	}
	env.Log("  VACUUM ANALYZE took %s", time.Since(began).Round(time.Second))
	return settleLoad(ctx, env, pool)
}

// settleLoad waits until a load has left the database: a checkpoint writes out what the load
// dirtied (else the next one, minutes later, would write gigabytes during a measured phase),
// and autovacuum's workers have finished (they pick the fresh tables up). A database that
// refuses CHECKPOINT (not a superuser) is measured as it is.
func settleLoad(ctx context.Context, env Env, pool *pgxpool.Pool) error {
	began := time.Now()
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		env.Log("  CHECKPOINT refused (%v): measuring without it", err)
	}
	quiet := 0
	err := pollUntil(ctx, 500*time.Millisecond, 15*time.Minute, func() (bool, error) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&n); err != nil {
			return false, err
		}
		if n > 0 {
			quiet = 0
		} else {
			quiet++
		}
		return quiet >= 6, nil // three seconds without a worker
	})
	if err != nil {
		return fmt.Errorf("settle after the load: %w", err)
	}
	env.Log("  the checkpoint and autovacuum took %s", time.Since(began).Round(time.Second))
	return nil
}

// depthStart is a start of workflow wf with the account's key, as the start phases send it.
func depthStart(env Env, acct account, wf string) Target {
	return Target{
		Method: http.MethodPost, URL: env.GatewayURL + "/api/workflows/" + wf + "/run",
		Header: http.Header{"X-Api-Key": {acct.key}, "Content-Type": {"application/json"}},
		Body:   []byte(`{}`), Expect: http.StatusAccepted, Check: runStarted, Per: "run",
	}
}

// depthCursor is the cursor of the list (org's, filtered) at its middle run, at most 500,000
// down: what a client paging that deep would send.
func depthCursor(ctx context.Context, pool *pgxpool.Pool, org, wf, status string) (string, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.runs WHERE organization_id = $1 AND ($2 = '' OR workflow_id = $2)
		AND ($3 = '' OR status = $3)`, org, wf, status).Scan(&n); err != nil {
		return "", err
	}
	var id string
	err := pool.QueryRow(ctx, `SELECT id FROM orchestrator.runs WHERE organization_id = $1 AND ($2 = '' OR workflow_id = $2)
		AND ($3 = '' OR status = $3) ORDER BY id DESC OFFSET $4 LIMIT 1`, org, wf, status, min(n/2, 500_000)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// An empty list: any run id as the position (the page is empty too).
		id = "run_0"
	} else if err != nil {
		return "", err
	}
	return wire.ListRule("runs").Scoped(org, wf, status).EncodeCursor(id), nil
}

func depthMeasure(ctx context.Context, env Env, pool *pgxpool.Pool, d *depthState, acct account, stage string) ([]Result, error) {
	var out []Result
	// Starts first, on the 2-block workflow.
	start := depthStart(env, acct, d.wfSmall)
	env.Log("  %s: POST /run at %g/s", stage, env.Rate)
	st, err := env.Generator.Run(ctx, env.phase(start))
	if err != nil {
		return out, err
	}
	out = append(out, Result{Scenario: "depth", Phase: stage + ": POST /run (202)", Stats: st})
	var err2 error
	if err2 = pool.QueryRow(ctx, `SELECT id FROM orchestrator.runs WHERE organization_id = $1 AND workflow_id = $2 AND status = 'completed'
		ORDER BY id DESC LIMIT 1`, d.org, d.wfLarge).Scan(&d.runID); err2 != nil {
		return out, fmt.Errorf("a run to read: %w", err2)
	}
	for _, c := range []struct {
		dst        *string
		wf, status string
	}{{&d.deepOrg, "", ""}, {&d.deepWf, d.wfLarge, ""}, {&d.deepStatus, "", "completed"}, {&d.deepFailed, "", "failed"}} {
		if *c.dst, err = depthCursor(ctx, pool, d.org, c.wf, c.status); err != nil {
			return out, fmt.Errorf("a deep cursor: %w", err)
		}
	}
	for _, t := range depthTargets() {
		target := Target{Method: http.MethodGet, URL: t.url(d), Header: http.Header{"X-Api-Key": {acct.key}}, Expect: http.StatusOK}
		ph := env.phase(target)
		ph.Rate = depthReadRate
		env.Log("  %s: %s at %d/s", stage, t.name, depthReadRate)
		st, err := env.Generator.Run(ctx, ph)
		if err != nil {
			return out, err
		}
		out = append(out, Result{Scenario: "depth", Phase: stage + ": " + t.name, Stats: st})
	}
	// A finished run's stream, read to its end: the catch-up a client reconnecting to a run
	// that ended while it was away gets.
	st, err = streamCatchUps(ctx, env, acct, d.runID, 50)
	if err != nil {
		return out, err
	}
	out = append(out, Result{Scenario: "depth", Phase: stage + ": GET /api/runs/:id/events catch-up (a finished 10-block run's whole stream, sequential)", Stats: st})
	// The organization's stream: time to its answer's headers, one connect at a time.
	st, err = streamConnects(ctx, env, acct, 50)
	if err != nil {
		return out, err
	}
	out = append(out, Result{Scenario: "depth", Phase: stage + ": GET /api/runs/events connect (sequential, to headers)", Stats: st})
	return out, nil
}

// streamConnects opens the organization's stream n times, one after another, and measures
// each until its 200's headers.
func streamConnects(ctx context.Context, env Env, acct account, n int) (Stats, error) {
	return sequentialStreams(ctx, env, acct, "/api/runs/events", n, func(*http.Response) error { return nil })
}

// streamCatchUps reads the whole event stream of a finished run n times, one after another,
// each from the request until the stream's end.
func streamCatchUps(ctx context.Context, env Env, acct account, runID string, n int) (Stats, error) {
	return sequentialStreams(ctx, env, acct, "/api/runs/"+runID+"/events", n, func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !bytes.Contains(body, []byte(`"completed"`)) {
			return errors.New("the stream ended without the run's completed status")
		}
		return nil
	})
}

// sequentialStreams opens the stream at path n times, one after another, and measures each
// from the request until read, given a 200, is done with it (an error fails that one).
func sequentialStreams(ctx context.Context, env Env, acct account, path string, n int, read func(*http.Response) error) (Stats, error) {
	client := newStreamClient()
	var lat []time.Duration
	failures := 0
	firstErr := ""
	began := time.Now()
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.GatewayURL+path, nil)
		if err != nil {
			return Stats{}, err
		}
		req.Header.Set("X-Api-Key", acct.key)
		req.Header.Set("Accept", "text/event-stream")
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			failures++
			firstErr = err.Error()
			continue
		}
		if resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		} else {
			err = read(resp)
		}
		if err != nil {
			failures++
			firstErr = err.Error()
		} else {
			lat = append(lat, time.Since(t0))
		}
		resp.Body.Close()
	}
	return sequentialStats(lat, failures, firstErr, time.Since(began)), nil
}

// depthSweep measures a retention sweep on the loaded database while starts continue at the
// scenario's rate, then the starts again once it stopped. The system keeps runs for ten years
// (systemEnv), so nothing was swept before; the scenario's organization now sets a period that
// puts every loaded run of its own past it, and the orchestrator's sweeper deletes them in the
// background, at its configured pace. Once it has begun, the start phase runs: its row is
// compared with the start phases without a sweep (before, "loaded: POST /run", and after,
// once the organization's period is reset and the sweep has stopped), and the runs deleted
// during it (the table's delete counter, pg_stat_user_tables.n_tup_del) give the sweep's rate.
func depthSweep(ctx context.Context, env Env, scenario string, pool *pgxpool.Pool, d *depthState, acct account, keyed *apiclient.Client) ([]Result, error) {
	// Past the period: every run that finished more than ten minutes before the scenario's
	// first run, so the scenario's own runs stay for the reads' sake.
	cutoff := d.began.Add(-10 * time.Minute)
	period := time.Since(cutoff).Round(time.Minute).String()
	pastPeriod := func() (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.runs WHERE organization_id = $1 AND finished_at < $2`, d.org, cutoff).Scan(&n)
		return n, err
	}
	expired, err := pastPeriod()
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	deleted := func() (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT n_tup_del FROM pg_stat_user_tables WHERE relid = 'orchestrator.runs'::regclass`).Scan(&n)
		return n, err
	}
	before, err := deleted()
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	env.Log("  sweep: the organization sets its retention to %s: about %d of its runs are past it", period, expired)
	if _, err := keyed.SetRetention(ctx, "", &period); err != nil {
		return nil, fmt.Errorf("sweep: PUT retention: %w", err)
	}
	reset := func(ctx context.Context) error {
		_, err := keyed.SetRetention(ctx, "", nil)
		return err
	}
	defer func() { _ = reset(context.WithoutCancel(ctx)) }()
	// The sweeper looks at the setting on its next sweep: at most one interval (1 m by default).
	if err := pollUntil(ctx, 500*time.Millisecond, 3*time.Minute, func() (bool, error) {
		n, err := deleted()
		return n > before, err
	}); err != nil {
		return nil, fmt.Errorf("sweep: no run deleted after the retention was set (is the orchestrator's sweeper on?): %w", err)
	}
	start := depthStart(env, acct, d.wfSmall)
	env.Log("  loaded, sweeping: POST /run at %g/s", env.Rate)
	from, err := deleted()
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	t0 := time.Now()
	st, err := env.Generator.Run(ctx, env.phase(start))
	if err != nil {
		return nil, err
	}
	took := time.Since(t0)
	to, err := deleted()
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	left, err := pastPeriod()
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	rate := float64(to-from) / took.Seconds()
	out := []Result{{Scenario: scenario, Phase: "loaded, sweeping: POST /run (202)", Stats: st,
		Note: fmt.Sprintf("Retention sweep during the start phase: %d runs deleted in %s (warm-up included), %.0f runs/s (target ≥ 2,000/s: %s); %d of the organization's runs were past the period when it was set,",
			to-from, took.Round(100*time.Millisecond), rate, verdict(rate >= 2000), expired)}}
	if left == 0 {
		out[0].Note += " none at the phase's end: the sweep ran out of runs during the phase, and the rate is a lower bound."
	} else {
		out[0].Note += fmt.Sprintf(" %d still at the phase's end.", left)
	}
	// The starts again without a sweep: the period reset, once the delete counter stands still.
	if err := reset(ctx); err != nil {
		return out, fmt.Errorf("sweep: reset the retention: %w", err)
	}
	last, _ := deleted()
	if err := pollUntil(ctx, 500*time.Millisecond, 3*time.Minute, func() (bool, error) {
		time.Sleep(2 * time.Second) // the statistics' own flush interval is a second
		n, err := deleted()
		still := n == last
		last = n
		return still, err
	}); err != nil {
		return out, fmt.Errorf("sweep: the sweep did not stop after the reset: %w", err)
	}
	env.Log("  loaded, after the sweep: POST /run at %g/s", env.Rate)
	st, err = env.Generator.Run(ctx, env.phase(start))
	if err != nil {
		return out, err
	}
	return append(out, Result{Scenario: scenario, Phase: "loaded, after the sweep: POST /run (202)", Stats: st}), nil
}

// sweepFindings puts the sweeping start phase beside the start phases without a sweep, before
// and after it: the rise of p50, p90 and p99 over their mean, against the target (p99 less
// than 20 % higher).
func sweepFindings(rows []Result) {
	var quiet []Stats
	sweeping := -1
	for i, r := range rows {
		switch r.Phase {
		case "loaded: POST /run (202)", "loaded, after the sweep: POST /run (202)":
			quiet = append(quiet, r.Stats)
		case "loaded, sweeping: POST /run (202)":
			sweeping = i
		}
	}
	if sweeping < 0 || len(quiet) == 0 {
		return
	}
	var p50, p90, p99 time.Duration
	for _, q := range quiet {
		p50, p90, p99 = p50+q.P50/time.Duration(len(quiet)), p90+q.P90/time.Duration(len(quiet)), p99+q.P99/time.Duration(len(quiet))
	}
	if p50 == 0 || p90 == 0 || p99 == 0 {
		return
	}
	s := rows[sweeping].Stats
	rise := func(v, base time.Duration) float64 { return 100 * (float64(v)/float64(base) - 1) }
	rows[sweeping].Note += fmt.Sprintf(" Starts while sweeping against the mean of the %d start phases without a sweep: p50 %s vs %s (%+.0f%%), p90 %s vs %s (%+.0f%%), p99 %s vs %s (%+.0f%%; target < +20%%: %s).",
		len(quiet), millis(s.P50), millis(p50), rise(s.P50, p50), millis(s.P90), millis(p90), rise(s.P90, p90),
		millis(s.P99), millis(p99), rise(s.P99, p99), verdict(rise(s.P99, p99) < 20))
}

// depthFindings puts each loaded row beside its empty one: the ratio of p50 and p99, against
// the 1.2× target.
func depthFindings(rows []Result) error {
	empty := map[string]Stats{}
	for _, r := range rows {
		if len(r.Phase) > 7 && r.Phase[:7] == "empty: " {
			empty[r.Phase[7:]] = r.Stats
		}
	}
	sweepFindings(rows)
	for i, r := range rows {
		if len(r.Phase) <= 8 || r.Phase[:8] != "loaded: " {
			continue
		}
		e, ok := empty[r.Phase[8:]]
		if !ok || e.P50 == 0 || e.P99 == 0 {
			continue
		}
		p50, p99 := float64(r.P50)/float64(e.P50), float64(r.P99)/float64(e.P99)
		rows[i].Note = fmt.Sprintf("%s: loaded/empty p50 %.2f×, p99 %.2f× (target ≤ 1.2×: %s).", r.Phase[8:], p50, p99, verdict(p50 <= 1.2 && p99 <= 1.2))
	}
	return nil
}
