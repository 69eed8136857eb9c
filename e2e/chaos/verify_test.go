package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// grace is how long after a fault window a 503 still counts as the fault's: the peers'
// circuit breakers stay open 5 s after their last failure, pools reconnect, a restarted
// replica catches up.
const grace = 10 * time.Second

// check is one invariant: how many items it looked at and which broke it.
type check struct {
	name       string
	checked    int
	violations []string
	bad        int // violations when one line stands for several (grouped 5xx)
	// timing marks a bound on measured time: reported (met or missed) with the figures, never
	// failing the run, since these machines drift too much for a timed assertion to be fair.
	timing bool
}

// verdict is everything the suite found, for the table.
type verdict struct {
	checks  []*check
	figures [][2]string // name, value
	faults  []faultRow
	final   map[string]map[string]int // kind → status → runs
}

type faultRow struct {
	w        window
	fiveXX   int
	noAnswer int
	recovery time.Duration // -1: nothing failed
}

func (v *verdict) check(name string) *check {
	c := &check{name: name}
	v.checks = append(v.checks, c)
	return c
}

func (c *check) failf(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// listRuns pages through a workflow's runs.
func (s *stack) listRuns(ctx context.Context, wf string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	cursor := ""
	for range 1000 {
		path := "/api/workflows/" + wf + "/runs?limit=500"
		if cursor != "" {
			path += "&after=" + url.QueryEscape(cursor)
		}
		r := s.api.retry(ctx, time.Now().Add(30*time.Second), "check", "GET", path, nil, true)
		if r.status != http.StatusOK {
			if r.err != nil {
				return nil, fmt.Errorf("list runs of %s: %w", wf, r.err)
			}
			return nil, fmt.Errorf("list runs of %s: %d %s", wf, r.status, r.raw)
		}
		items, _ := r.body["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			id, _ := m["runId"].(string)
			out[id] = m
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" || len(items) == 0 {
			return out, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("list runs of %s: paging does not end", wf)
}

// logs returns a run's attempts.
func (s *stack) logs(ctx context.Context, id string) []map[string]any {
	var out []map[string]any
	cursor := ""
	for range 100 {
		path := "/api/runs/" + id + "/logs?limit=1000"
		if cursor != "" {
			path += "&after=" + url.QueryEscape(cursor)
		}
		r := s.api.retry(ctx, time.Now().Add(30*time.Second), "check", "GET", path, nil, true)
		if r.status != http.StatusOK {
			return out
		}
		items, _ := r.body["items"].([]any)
		if len(items) == 0 {
			return out
		}
		for _, it := range items {
			m, _ := it.(map[string]any)
			out = append(out, m)
		}
		cursor, _ = r.body["nextCursor"].(string)
		if cursor == "" {
			return out
		}
	}
	return out
}

// logText is a run's attempts, one line each, for a failure message.
func (s *stack) logText(ctx context.Context, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "logs of %s:", id)
	for _, a := range s.logs(ctx, id) {
		fmt.Fprintf(&b, "\n    %v#%v %v started %v finished %v error %v", a["block_id"], a["attempt"], a["status"], a["startedAt"], a["finishedAt"], a["error"])
	}
	return b.String()
}

// engineState is what the database holds about a run's jobs and attempts (River's job rows,
// the replicas of its attempts and their heartbeats), for the report of a stuck run.
func (s *stack) engineState(ctx context.Context, id string) string {
	var b strings.Builder
	b.WriteString("engine state:")
	rows, err := s.db.Query(ctx, `SELECT id, state, attempt, max_attempts, scheduled_at, coalesce(attempted_at, 'epoch'),
			coalesce(array_to_string(attempted_by, ','), ''), coalesce(errors[array_length(errors, 1)]::text, '')
		FROM orchestrator.river_job WHERE args->>'run_id' = $1 ORDER BY id`, id)
	if err != nil {
		return b.String() + " " + err.Error()
	}
	for rows.Next() {
		var jid int64
		var state, by, lastErr string
		var attempt, maxAttempts int
		var scheduled, attempted time.Time
		if err := rows.Scan(&jid, &state, &attempt, &maxAttempts, &scheduled, &attempted, &by, &lastErr); err != nil {
			fmt.Fprintf(&b, " %v", err)
			break
		}
		fmt.Fprintf(&b, "\n    river_job %d %s attempt %d/%d scheduled %s attempted %s by %s last error %s", jid, state, attempt, maxAttempts,
			scheduled.UTC().Format(time.RFC3339Nano), attempted.UTC().Format(time.RFC3339Nano), by, lastErr)
	}
	rows.Close()
	rows, err = s.db.Query(ctx, `SELECT a.block_id, a.attempt, a.status, coalesce(a.replica, ''), coalesce(r.pid, 0), coalesce(r.heartbeat_at, 'epoch')
		FROM orchestrator.step_attempts a LEFT JOIN orchestrator.replicas r ON r.id = a.replica
		WHERE a.run_id = $1 AND a.status = 'running'`, id)
	if err != nil {
		return b.String() + " " + err.Error()
	}
	for rows.Next() {
		var blk, status, replica string
		var attempt, pid int
		var hb time.Time
		if err := rows.Scan(&blk, &attempt, &status, &replica, &pid, &hb); err != nil {
			fmt.Fprintf(&b, " %v", err)
			break
		}
		fmt.Fprintf(&b, "\n    attempt %s#%d %s on replica %s (pid %d, heartbeat %s)", blk, attempt, status, replica, pid, hb.UTC().Format(time.RFC3339Nano))
	}
	rows.Close()
	return b.String()
}

// verify waits for every run to settle (until settle passes) and checks the invariants.
func (s *stack) verify(ctx context.Context, led *ledger, windows []window, settle time.Duration) *verdict {
	v := &verdict{final: map[string]map[string]int{}}
	kinds := make([]string, 0, len(s.wf))
	for k := range s.wf {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)

	// Schedule runs are known from the tick workflow's list; add them to the ledger.
	led.mu.Lock()
	tracked := map[string]*trackedRun{}
	for id, r := range led.runs {
		cp := *r
		tracked[id] = &cp
	}
	led.mu.Unlock()

	var seen map[string]map[string]any
	var deleted map[string]bool // runs the retention sweep deleted after the archive saw them
	deadline := time.Now().Add(settle)
	for {
		seen = map[string]map[string]any{}
		deleted = map[string]bool{}
		for _, k := range kinds {
			runs, err := s.listRuns(ctx, s.wf[k])
			if err != nil {
				s.t.Errorf("%v", err)
				continue
			}
			for id, r := range s.kept.gone(k, runs) {
				runs[id] = r
				deleted[id] = true
			}
			for id, r := range runs {
				seen[id] = r
				if k == "tick" {
					if _, ok := tracked[id]; !ok {
						tracked[id] = &trackedRun{id: id, kind: "tick", want: "completed"}
					}
				}
			}
		}
		pending := 0
		for id, r := range tracked {
			if got, ok := seen[id]; ok && !terminal(fmt.Sprint(got["status"])) && (r.kind != "signal" || len(r.signals) > 0) {
				pending++
			}
		}
		// A claimed fire whose dispatch failed is retried by later ticks: wait for those too.
		var fires int
		if err := s.db.QueryRow(ctx, `SELECT count(*) FROM scheduler.schedule_fires WHERE status = 'pending'`).Scan(&fires); err == nil {
			pending += fires
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // polling pace
	}

	// --- runs reach the state their definition implies -------------------------------------
	ends := v.check("every 202'd run reached its terminal state")
	lost := v.check("lost: 202'd run missing, or a completed run's step never reached the sink")
	stuck := v.check("stuck: not terminal after the faults ended")
	counts := s.sink.counts()
	ids := make([]string, 0, len(tracked))
	for id := range tracked {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := tracked[id]
		got, ok := seen[id]
		ends.checked++
		lost.checked++
		stuck.checked++
		if !ok {
			lost.failf("run %s (%s) was accepted but is not listed", id, r.kind)
			continue
		}
		status := fmt.Sprint(got["status"])
		if v.final[r.kind] == nil {
			v.final[r.kind] = map[string]int{}
		}
		v.final[r.kind][status]++
		if r.kind == "signal" && len(r.signals) == 0 {
			continue // its signal was never accepted: nothing says it must end
		}
		if !terminal(status) {
			stuck.failf("run %s (%s) is %s, want %s: %v\n  %s\n  %s", id, r.kind, status, r.want, got, s.logText(ctx, id), s.engineState(ctx, id))
			continue
		}
		if status != r.want {
			ends.failf("run %s (%s) ended %s, want %s: error %v\n  %s", id, r.kind, status, r.want, got["error"], s.logText(ctx, id))
			continue
		}
		if status == "completed" {
			for _, b := range sinkBlocks[r.kind] {
				if counts[id+"/"+b] == 0 {
					lost.failf("run %s (%s) completed but %s never called the sink\n  %s", id, r.kind, b, s.logText(ctx, id))
				}
			}
		}
	}

	// --- no side effect twice unless an attempt was lost ------------------------------------
	doubled := v.check("doubled: a (run, block) hit the sink twice without a lost attempt")
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		doubled.checked++
		n := counts[key]
		if n < 2 {
			continue
		}
		run, blk := splitKey(key)
		lostAttempts := 0
		if deleted[run] {
			lostAttempts = s.kept.lostAttempts(key)
		}
		for _, a := range s.logs(ctx, run) {
			if a["block_id"] == blk && a["status"] == "lost" {
				lostAttempts++
			}
		}
		if n > 1+lostAttempts {
			doubled.failf("%s hit the sink %d times, %d attempts lost\n  %s", key, n, lostAttempts, s.logText(ctx, run))
		}
	}

	// --- schedules: one run per (schedule, cutoff) -------------------------------------------
	sched := v.check("each (schedule, cutoff) exactly one run")
	byCutoff := map[string][]string{}
	for id, r := range seen {
		tr, _ := r["trigger"].(map[string]any)
		if tr["kind"] == "schedule" {
			key := fmt.Sprint(tr["scheduleId"]) + "|" + fmt.Sprint(tr["cutoff"])
			byCutoff[key] = append(byCutoff[key], id)
		}
	}
	led.mu.Lock()
	fires := map[string][]string{}
	for k, set := range led.fires {
		for id := range set {
			fires[k] = append(fires[k], id)
		}
	}
	led.mu.Unlock()
	all := map[string]bool{}
	for k := range byCutoff {
		all[k] = true
	}
	for k := range fires {
		all[k] = true
	}
	// The scheduler's own record of each claimed fire: dispatched, naming the one run.
	stored := map[string]string{}
	rows, err := s.db.Query(ctx, `SELECT schedule_id, cutoff, status, coalesce(run_id, ''), coalesce(error, '') FROM scheduler.schedule_fires`)
	if err != nil {
		s.t.Errorf("schedule fires: %v", err)
	} else {
		for rows.Next() {
			var sid, status, runID, ferr string
			var cutoff time.Time
			if err := rows.Scan(&sid, &cutoff, &status, &runID, &ferr); err != nil {
				s.t.Errorf("schedule fires: %v", err)
				break
			}
			k := sid + "|" + cutoff.UTC().Format("2006-01-02T15:04:05.000Z")
			all[k] = true
			stored[k] = runID
			if status != "dispatched" {
				sched.failf("fire %s is %s (error %q): its run was never started", k, status, ferr)
			}
		}
		rows.Close()
	}
	for k := range all {
		sched.checked++
		runs, named := byCutoff[k], fires[k]
		switch {
		case len(runs) != 1:
			sched.failf("%s has %d runs %v (ticks named %v)", k, len(runs), runs, named)
		case len(named) > 1 || (len(named) == 1 && named[0] != runs[0]):
			sched.failf("%s: ticks named runs %v, the run is %s", k, named, runs[0])
		case stored[k] != runs[0]:
			sched.failf("%s: the scheduler recorded run %q, the run is %s", k, stored[k], runs[0])
		}
	}

	// --- webhooks: one run per webhook id -----------------------------------------------------
	hooks := v.check("each webhook id exactly one run")
	byKey := map[string][]string{}
	for id, r := range seen {
		tr, _ := r["trigger"].(map[string]any)
		if tr["kind"] == "webhook" {
			k := fmt.Sprint(tr["idempotencyKey"])
			byKey[k] = append(byKey[k], id)
		}
	}
	led.mu.Lock()
	for id, set := range led.hooks {
		hooks.checked++
		named := make([]string, 0, len(set))
		for r := range set {
			named = append(named, r)
		}
		runs := byKey[id]
		switch {
		case len(runs) > 1:
			hooks.failf("webhook %s has %d runs %v", id, len(runs), runs)
		case len(named) > 1:
			hooks.failf("webhook %s: its 202s named %d runs %v", id, len(named), named)
		case len(named) == 1 && (len(runs) != 1 || runs[0] != named[0]):
			hooks.failf("webhook %s: 202 named %s, listed runs %v", id, named[0], runs)
		}
	}
	for k, runs := range byKey {
		if _, ok := led.hooks[k]; !ok {
			hooks.failf("runs %v for webhook id %s the suite never sent", runs, k)
		}
	}
	led.mu.Unlock()

	// --- signals: each accepted signal consumed once ------------------------------------------
	sigs := v.check("each accepted signal consumed once")
	for _, id := range ids {
		r := tracked[id]
		if r.kind != "signal" || len(r.signals) == 0 {
			continue
		}
		sigs.checked++
		status := fmt.Sprint(seen[id]["status"])
		if deleted[id] {
			st := s.kept.signal(id)
			switch {
			case status == "completed" && (len(st.consumed) != 1 || st.waits != 1):
				sigs.failf("run %s (deleted by retention): %d of %d stored signals consumed, the wait succeeded %d times", id, len(st.consumed), st.stored, st.waits)
			case status == "completed" && r.signalTries == 1 && !st.consumed[r.signals[0]]:
				sigs.failf("run %s (deleted by retention): the one signal sent (%s) is not the one consumed %v", id, r.signals[0], st.consumed)
			}
			continue
		}
		rows, err := s.db.Query(ctx, `SELECT id, consumed_by IS NOT NULL FROM orchestrator.signals WHERE run_id = $1`, id)
		if err != nil {
			s.t.Errorf("signals of %s: %v", id, err)
			continue
		}
		consumed := map[string]bool{}
		stored := 0
		for rows.Next() {
			var sid string
			var c bool
			if err := rows.Scan(&sid, &c); err != nil {
				s.t.Errorf("signals of %s: %v", id, err)
			}
			stored++
			if c {
				consumed[sid] = true
			}
		}
		rows.Close()
		var waits int
		if err := s.db.QueryRow(ctx, `SELECT count(*) FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'gate' AND status = 'succeeded'`, id).Scan(&waits); err != nil {
			s.t.Errorf("attempts of %s: %v", id, err)
		}
		switch {
		case status == "completed" && (len(consumed) != 1 || waits != 1):
			sigs.failf("run %s: %d of %d stored signals consumed, the wait succeeded %d times\n  %s", id, len(consumed), stored, waits, s.logText(ctx, id))
		case status == "completed" && r.signalTries == 1 && !consumed[r.signals[0]]:
			sigs.failf("run %s: the one signal sent (%s) is not the one consumed %v", id, r.signals[0], consumed)
		}
	}

	// --- If-Match: of concurrent same-version patches exactly one applies ---------------------
	patches := v.check("exactly one of concurrent same-version patches applied")
	led.mu.Lock()
	for _, p := range led.patches {
		patches.checked++
		oks, faulted := 0, 0
		var okBlock string
		for i, st := range p.statuses {
			switch {
			case st == http.StatusOK:
				oks++
				okBlock = p.blocks[i]
			case st == 0 || st >= 500:
				faulted++
			case st != http.StatusPreconditionFailed:
				patches.failf("%s@%d: a patch answered %d", p.wf, p.version, st)
			}
		}
		switch {
		case len(p.present) > 1 || oks > 1:
			patches.failf("%s@%d: %d answered 200, %d applied %v (statuses %v)", p.wf, p.version, oks, len(p.present), p.present, p.statuses)
		case oks == 1 && (len(p.present) != 1 || p.present[0] != okBlock):
			patches.failf("%s@%d: %s answered 200 but the definition holds %v", p.wf, p.version, okBlock, p.present)
		case oks == 0 && faulted == 0:
			patches.failf("%s@%d: none applied though none failed (statuses %v)", p.wf, p.version, p.statuses)
		case p.after != p.version+len(p.present):
			patches.failf("%s@%d: version %d after %d applied", p.wf, p.version, p.after, len(p.present))
		}
	}
	odd := v.check("answers no fault explains (unexpected 4xx)")
	odd.checked = len(led.odd)
	odd.violations = append(odd.violations, led.odd...)
	led.mu.Unlock()

	// --- every 5xx a 503 inside a fault window -------------------------------------------------
	outcomes := s.rec.outcomes()
	fiveXX := v.check("5xx outside fault windows (or not 503)")
	noAnswer := v.check("no answer (connection refused/reset) outside fault windows")
	// The window a request overlaps (with grace); of several, the one that began last.
	windowOf := func(o outcome) int {
		at := -1
		for i, w := range windows {
			if !o.end.Before(w.start) && !o.start.After(w.end.Add(grace)) && (at < 0 || w.start.After(windows[at].start)) {
				at = i
			}
		}
		return at
	}
	inWindow := func(o outcome) (string, bool) {
		if i := windowOf(o); i >= 0 {
			return windows[i].name, true
		}
		return "", false
	}
	// Violations are grouped by what was answered and in which window, with a count and the
	// first occurrence: one broken mapping shows as one line, not hundreds.
	type group struct {
		n     int
		first outcome
	}
	groups := map[string]*group{}
	var order []string
	for _, o := range outcomes {
		if o.op == "setup" {
			continue
		}
		if o.status >= 500 {
			fiveXX.checked++
			name, ok := inWindow(o)
			if !ok || o.status != http.StatusServiceUnavailable {
				if !ok {
					name = "none"
				}
				key := fmt.Sprintf("%s %d %s (window: %s)", o.op, o.status, strings.TrimSpace(o.body), name)
				if groups[key] == nil {
					groups[key] = &group{first: o}
					order = append(order, key)
				}
				groups[key].n++
			}
		}
		if o.err != "" {
			noAnswer.checked++
			if _, ok := inWindow(o); !ok {
				noAnswer.failf("%s %s %s at %s: %s", o.op, o.method, o.path, o.start.Format("15:04:05.000"), o.err)
			}
		}
	}

	for _, key := range order {
		g := groups[key]
		fiveXX.failf("%d× %s — first %s %s at %s", g.n, key, g.first.method, g.first.path, g.first.start.Format("15:04:05.000"))
		fiveXX.bad += g.n
	}

	// --- figures -----------------------------------------------------------------------------
	var recoveries []time.Duration
	for i, w := range windows {
		row := faultRow{w: w, recovery: -1}
		failedOps := map[string]bool{}
		for _, o := range outcomes {
			if (o.status < 500 && o.err == "") || windowOf(o) != i {
				continue
			}
			if o.status >= 500 {
				row.fiveXX++
				failedOps[o.op] = true
			}
			if o.err != "" {
				row.noAnswer++
				failedOps[o.op] = true
			}
		}
		if len(failedOps) > 0 {
			for _, o := range outcomes {
				if failedOps[o.op] && !o.start.Before(w.end) && o.err == "" && o.status > 0 && o.status < 500 {
					if d := o.end.Sub(w.end); row.recovery < 0 || d < row.recovery {
						row.recovery = d
					}
				}
			}
			if row.recovery >= 0 {
				recoveries = append(recoveries, row.recovery)
			}
		}
		v.faults = append(v.faults, row)
	}
	slices.Sort(recoveries)
	if len(recoveries) > 0 {
		v.figures = append(v.figures, [2]string{"recovery after a fault (first success of a failed operation after the window): p50 / max",
			fmt.Sprintf("%s / %s (%d faults with failures)", recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond), len(recoveries))})
	}
	limited, served, redisDown := 0, 0, false
	for _, w := range windows {
		redisDown = redisDown || strings.HasPrefix(w.name, "redis down")
	}
	for _, o := range outcomes {
		for _, w := range windows {
			if strings.HasPrefix(w.name, "redis down") && !o.start.Before(w.start) && !o.start.After(w.end) {
				if o.status == http.StatusTooManyRequests {
					limited++
				} else if o.status > 0 && o.status < 500 {
					served++
				}
			}
		}
	}
	if redisDown {
		v.figures = append(v.figures, [2]string{"rate limiter while Redis was down: 429s / answered requests", fmt.Sprintf("%d / %d", limited, served)})
	}
	total5, totalErr := 0, 0
	for _, o := range outcomes {
		if o.status >= 500 {
			total5++
		}
		if o.err != "" {
			totalErr++
		}
	}
	v.figures = append(v.figures, [2]string{"requests / 5xx / no answer", fmt.Sprintf("%d / %d / %d", len(outcomes), total5, totalErr)})
	return v
}

// markdown renders the verdict as the report's tables.
// publish logs the report md, writes it to the file the environment variable reportVar
// names (if set), and fails the test on each violation (the first 20 of each check).
func (v *verdict) publish(t *testing.T, md, reportVar string) {
	t.Helper()
	t.Log("\n" + md)
	if path := os.Getenv(reportVar); path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Errorf("%s: %v", reportVar, err)
		}
	}
	for _, c := range v.checks {
		if c.timing {
			for _, viol := range c.violations {
				t.Logf("%s (a timing, reported, not failed): %s", c.name, viol)
			}
			continue
		}
		for i, viol := range c.violations {
			if i == 20 {
				t.Errorf("%s: ... and %d more", c.name, len(c.violations)-20)
				break
			}
			t.Errorf("%s: %s", c.name, viol)
		}
	}
}

func (v *verdict) markdown(title string, started time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n| invariant | checked | violations | result |\n|---|---:|---:|---|\n", title)
	for _, c := range v.checks {
		res, n := "pass", max(len(c.violations), c.bad)
		if n > 0 {
			res = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", c.name, c.checked, n, res)
	}
	b.WriteString("\n| figure | value |\n|---|---|\n")
	for _, f := range v.figures {
		fmt.Fprintf(&b, "| %s | %s |\n", f[0], f[1])
	}
	b.WriteString("\n| fault | at | window | 5xx | no answer | recovery |\n|---|---:|---:|---:|---:|---:|\n")
	for _, f := range v.faults {
		rec := "unaffected"
		if f.recovery >= 0 {
			rec = f.recovery.Round(time.Millisecond).String()
		} else if f.fiveXX+f.noAnswer > 0 {
			rec = "no success after"
		}
		fmt.Fprintf(&b, "| %s | +%s | %s | %d | %d | %s |\n", f.w.name, f.w.start.Sub(started).Round(time.Second),
			f.w.end.Sub(f.w.start).Round(time.Millisecond), f.fiveXX, f.noAnswer, rec)
	}
	b.WriteString("\n| workflow kind | final states |\n|---|---|\n")
	kinds := make([]string, 0, len(v.final))
	for k := range v.final {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		var parts []string
		for st, n := range v.final[k] {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, "| %s | %s |\n", k, strings.Join(parts, ", "))
	}
	return b.String()
}
