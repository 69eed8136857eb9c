package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoak runs the chaos suite's mixed workload without faults for SVC_SOAK_DURATION and
// samples, every SVC_SOAK_INTERVAL (30s), each process's RSS, goroutines and open sockets,
// Postgres's connections and the size of every table of the system. It passes when nothing
// that should level off keeps growing after warm-up, and when the chaos invariants hold.
//
// "Grows without bound" is judged on thirds of the samples: the first third is warm-up
// (pools fill, caches and River's job retention window fill up), and a series fails when the
// mean of the last third exceeds the mean of the middle third by more than a tolerance (a
// ratio plus an absolute slack, so that small numbers do not trip it on noise). A leak that
// grows steadily shows up as last > middle; a level series does not. Tables of history (runs,
// attempts, signals, fires, idempotency keys) grow with the work by design and are only
// reported; River's finished jobs are bounded by its retention (5 min), so they are judged
// once the soak is long enough for the retention to have turned over in the middle third.
func TestSoak(t *testing.T) {
	raw := os.Getenv("SVC_SOAK_DURATION")
	if raw == "" {
		t.Skip("soak: set SVC_SOAK_DURATION (make soak)")
	}
	dur, err := time.ParseDuration(raw)
	if err != nil || dur <= 0 {
		t.Fatalf("SVC_SOAK_DURATION=%q: want a positive duration such as 30m", raw)
	}
	interval := 30 * time.Second
	if v := os.Getenv("SVC_SOAK_INTERVAL"); v != "" {
		if interval, err = time.ParseDuration(v); err != nil || interval <= 0 {
			t.Fatalf("SVC_SOAK_INTERVAL=%q: want a positive duration", v)
		}
	}

	s := setup(t, stackOptions{pprof: true, logLevel: "warn", orchestrator: map[string]string{
		"SVC_RUN_RETENTION": soakRetention.String(), "SVC_RETENTION_SWEEP_INTERVAL": soakSweep.String(),
	}})
	s.kept = newArchive()
	s.schedules(3)
	led := newLedger()
	bg, cancelBG := context.WithCancel(context.Background())
	t.Cleanup(cancelBG)
	started := time.Now()
	w := &workload{s: s, led: led, bg: bg}
	w.finishWithin(24 * time.Hour) // until the stop below
	ctx, stop := context.WithCancel(bg)
	wait := w.start(ctx, 3, 300*time.Millisecond)

	var samples []sample
	for next := started; ; next = next.Add(interval) {
		time.Sleep(time.Until(next)) // the sampling pace
		sm := s.sample(bg, time.Since(started))
		samples = append(samples, sm)
		t.Log(sm.line())
		// Every finished run is listed before the sweep may delete it (the interval is far
		// shorter than the retention); a failed pass is made up by the next one.
		if err := s.keep(bg, s.kept); err != nil {
			t.Logf("archive of finished runs: %v", err)
		}
		if time.Since(started)+interval > dur {
			break
		}
	}
	stop()
	w.finishWithin(45 * time.Second)
	wait()
	if err := s.keep(bg, s.kept); err != nil {
		t.Logf("archive of finished runs: %v", err)
	}
	if dir := os.Getenv("SVC_SOAK_PROFILES"); dir != "" {
		s.saveHeapProfiles(bg, t, dir)
	}

	vctx, cancel := context.WithTimeout(bg, 5*time.Minute)
	defer cancel()
	v := s.verify(vctx, led, nil, 60*time.Second)
	report := soakReport(samples, dur)
	md := v.markdown(fmt.Sprintf("Soak run (%s, a sample every %s, run retention %s), invariants", dur, interval, soakRetention), started) +
		"\n" + report.markdown + "\n" + tableReport(samples)
	v.publish(t, md, "SVC_SOAK_REPORT")
	for _, g := range report.grew {
		t.Errorf("grows without bound: %s", g)
	}
}

// The soak's system deletes finished runs after soakRetention, swept every soakSweep, so that
// the tables of history level off as they would in production, only sooner.
const (
	soakRetention = 3 * time.Minute
	soakSweep     = 15 * time.Second
)

// saveHeapProfiles writes each service's heap profile (after a GC) to dir/<role>.heap, for
// `go tool pprof` when a series grows: SVC_SOAK_PROFILES=<dir>.
func (s *stack) saveHeapProfiles(ctx context.Context, t *testing.T, dir string) {
	for _, role := range s.roles() {
		u := s.proc(role).PprofURL()
		if u == "" {
			continue
		}
		body, err := fetchPprof(ctx, u, "/debug/pprof/heap?gc=1", 0)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, role+".heap"), body, 0o644)
		}
		if err != nil {
			t.Logf("heap profile of %s: %v", role, err)
		}
	}
}

// sample is one reading of the system's resources.
type sample struct {
	at         time.Duration
	rssKB      map[string]int64 // role → VmRSS
	goroutines map[string]int64
	sockets    map[string]int64 // role → open socket fds
	pgConns    map[string]int64 // application_name → connections
	tables     map[string]int64 // schema.table → pg_total_relation_size
	doneJobs   int64            // River jobs kept in a finished state
	// River's job table as Postgres's statistics see it (pg_stat_user_tables): live and dead
	// rows, autovacuums so far, seconds since the last one (-1: none yet).
	jobLive, jobDead, jobVacuums, jobVacuumAgo int64
	// The database's xmin horizon: the age in transactions of the oldest snapshot a backend
	// holds, the longest open transaction (s) and the sessions idle in a transaction. A
	// horizon held back keeps vacuum from removing dead rows anywhere in the database.
	xminAge, longestXact, idleInXact int64
	// jobHeap and jobIndexes are river_job's heap and each of its indexes (pg_relation_size),
	// to tell which part of the table grows.
	jobHeap    int64
	jobIndexes map[string]int64
}

func (s *stack) sample(ctx context.Context, at time.Duration) sample {
	out := sample{at: at, rssKB: map[string]int64{}, goroutines: map[string]int64{}, sockets: map[string]int64{},
		pgConns: map[string]int64{}, tables: map[string]int64{}, jobIndexes: map[string]int64{}}
	for _, role := range s.roles() {
		p := s.proc(role)
		out.rssKB[role] = rssKB(p.Pid())
		out.sockets[role] = sockets(p.Pid())
		out.goroutines[role] = goroutines(ctx, p.PprofURL())
	}
	rows, err := s.db.Query(ctx, `SELECT coalesce(nullif(application_name, ''), backend_type), count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1`)
	if err == nil {
		for rows.Next() {
			var name string
			var n int64
			if rows.Scan(&name, &n) == nil {
				out.pgConns[name] = n
			}
		}
		rows.Close()
	}
	rows, err = s.db.Query(ctx, `SELECT n.nspname || '.' || c.relname, pg_total_relation_size(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`)
	if err == nil {
		for rows.Next() {
			var name string
			var n int64
			if rows.Scan(&name, &n) == nil {
				out.tables[name] = n
			}
		}
		rows.Close()
	}
	_ = s.db.QueryRow(ctx, `SELECT count(*) FROM orchestrator.river_job WHERE state IN ('completed', 'cancelled', 'discarded')`).Scan(&out.doneJobs)
	out.jobLive, out.jobDead, out.jobVacuums, out.jobVacuumAgo = -1, -1, -1, -1
	_ = s.db.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, autovacuum_count, coalesce(extract(epoch FROM now() - last_autovacuum)::bigint, -1)
		FROM pg_stat_user_tables WHERE schemaname = 'orchestrator' AND relname = 'river_job'`).Scan(&out.jobLive, &out.jobDead, &out.jobVacuums, &out.jobVacuumAgo)
	_ = s.db.QueryRow(ctx, `SELECT coalesce(max(age(backend_xmin)), 0), coalesce(max(extract(epoch FROM now() - xact_start))::bigint, 0),
			count(*) FILTER (WHERE state LIKE 'idle in transaction%')
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&out.xminAge, &out.longestXact, &out.idleInXact)
	_ = s.db.QueryRow(ctx, `SELECT pg_relation_size('orchestrator.river_job')`).Scan(&out.jobHeap)
	rows, err = s.db.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'orchestrator.river_job'::regclass`)
	if err == nil {
		for rows.Next() {
			var name string
			var n int64
			if rows.Scan(&name, &n) == nil {
				out.jobIndexes[name] = n
			}
		}
		rows.Close()
	}
	return out
}

// watchedTables are the tables whose size the soak logs at every sample and sums up at the
// end: River's queue and the run store's history.
var watchedTables = []string{ //nolint:gochecknoglobals // fixed list
	"orchestrator.river_job", "orchestrator.runs", "orchestrator.step_attempts", "orchestrator.run_statuses",
	"orchestrator.run_blocks", "orchestrator.signals", "orchestrator.idempotency_keys",
}

// line is one sample for the test's log: the watched tables' sizes, River's job rows and the
// xmin horizon.
func (sm sample) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "+%s tables (KiB):", sm.at.Round(time.Second))
	for _, tb := range watchedTables {
		if n, ok := sm.tables[tb]; ok {
			fmt.Fprintf(&b, " %s=%d", strings.TrimPrefix(tb, "orchestrator."), n/1024)
		}
	}
	fmt.Fprintf(&b, "; river_job heap=%d", sm.jobHeap/1024)
	for _, ix := range slices.Sorted(maps.Keys(sm.jobIndexes)) {
		fmt.Fprintf(&b, " %s=%d", strings.TrimPrefix(ix, "river_job_"), sm.jobIndexes[ix]/1024)
	}
	fmt.Fprintf(&b, "; rows live=%d dead=%d finished=%d autovacuums=%d (last %ds ago); xmin age=%d, longest xact %ds, idle in xact %d",
		sm.jobLive, sm.jobDead, sm.doneJobs, sm.jobVacuums, sm.jobVacuumAgo, sm.xminAge, sm.longestXact, sm.idleInXact)
	return b.String()
}

// tableReport sums up the watched tables and River's rows: the first sample, the first one
// taken once River's retention of finished jobs (5 min) and the run retention have both
// turned over, the last, and the largest.
func tableReport(samples []sample) string {
	if len(samples) == 0 {
		return ""
	}
	settled := len(samples) - 1
	for i, sm := range samples {
		if sm.at >= 5*time.Minute+soakRetention/2 {
			settled = i
			break
		}
	}
	first, mid, last := samples[0], samples[settled], samples[len(samples)-1]
	var b strings.Builder
	fmt.Fprintf(&b, "### Tables over the soak (first at +%s, settled at +%s, last at +%s)\n\n| series | first | settled | last | max |\n|---|---:|---:|---:|---:|\n",
		first.at.Round(time.Second), mid.at.Round(time.Second), last.at.Round(time.Second))
	row := func(name string, get func(sample) int64) {
		peak := get(first)
		for _, sm := range samples {
			peak = max(peak, get(sm))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", name, get(first), get(mid), get(last), peak)
	}
	for _, tb := range watchedTables {
		if _, ok := last.tables[tb]; ok {
			row(tb+" (KiB)", func(sm sample) int64 { return sm.tables[tb] / 1024 })
		}
	}
	row("river_job heap (KiB)", func(sm sample) int64 { return sm.jobHeap / 1024 })
	for _, ix := range slices.Sorted(maps.Keys(last.jobIndexes)) {
		row(ix+" (KiB)", func(sm sample) int64 { return sm.jobIndexes[ix] / 1024 })
	}
	row("river_job live rows", func(sm sample) int64 { return sm.jobLive })
	row("river_job dead rows", func(sm sample) int64 { return sm.jobDead })
	row("river_job finished jobs", func(sm sample) int64 { return sm.doneJobs })
	row("river_job autovacuums", func(sm sample) int64 { return sm.jobVacuums })
	row("xmin horizon age (xids)", func(sm sample) int64 { return sm.xminAge })
	row("longest open transaction (s)", func(sm sample) int64 { return sm.longestXact })
	row("sessions idle in transaction", func(sm sample) int64 { return sm.idleInXact })
	return b.String()
}

// rssKB is the process's resident set (VmRSS) in kB, or -1.
func rssKB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// sockets counts the process's open file descriptors that are sockets, or -1.
func sockets(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	var n int64
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// fetchPprof reads path of the profiler at base: the whole answer, or its first limit bytes
// when limit > 0.
func fetchPprof(ctx context.Context, base, path string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if limit > 0 {
		r = io.LimitReader(resp.Body, limit)
	}
	return io.ReadAll(r)
}

// goroutines reads the count from the process's profiler ("goroutine profile: total N"), or -1.
func goroutines(ctx context.Context, pprof string) int64 {
	if pprof == "" {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	head, err := fetchPprof(ctx, pprof, "/debug/pprof/goroutine?debug=1", 4096)
	if err != nil {
		return -1
	}
	first, _, ok := strings.Cut(string(head), "\n")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(first, "goroutine profile: total")), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// series is one judged quantity over the samples.
type series struct {
	name   string
	values []int64
	ratio  float64 // tolerated growth of the last third's mean over the middle third's
	slack  float64 // and absolute slack on top
	judge  bool
}

type soakResult struct {
	markdown string
	grew     []string
}

func thirds(v []int64) (mid, last float64, ok bool) {
	n := len(v)
	if n < 6 {
		return 0, 0, false
	}
	mean := func(xs []int64) float64 {
		var s float64
		for _, x := range xs {
			s += float64(x)
		}
		return s / float64(len(xs))
	}
	return mean(v[n/3 : 2*n/3]), mean(v[2*n/3:]), true
}

// soakReport builds the sample tables and judges each series.
func soakReport(samples []sample, dur time.Duration) soakResult {
	var res soakResult
	var b strings.Builder
	roles := []string{}
	if len(samples) > 0 {
		for r := range samples[0].rssKB {
			roles = append(roles, r)
		}
	}
	sort.Strings(roles)
	var all []series
	col := func(name string, ratio, slack float64, judge bool, get func(sample) int64) {
		s := series{name: name, ratio: ratio, slack: slack, judge: judge}
		for _, sm := range samples {
			s.values = append(s.values, get(sm))
		}
		all = append(all, s)
	}
	for _, r := range roles {
		col(r+" RSS (MiB)", 0.20, 16, true, func(sm sample) int64 { return sm.rssKB[r] / 1024 })
	}
	for _, r := range roles {
		col(r+" goroutines", 0.20, 25, true, func(sm sample) int64 { return sm.goroutines[r] })
	}
	for _, r := range roles {
		col(r+" sockets", 0.25, 10, true, func(sm sample) int64 { return sm.sockets[r] })
	}
	apps := map[string]bool{}
	tables := map[string]bool{}
	for _, sm := range samples {
		for a := range sm.pgConns {
			apps[a] = true
		}
		for tb := range sm.tables {
			tables[tb] = true
		}
	}
	col("postgres connections (all)", 0.25, 10, true, func(sm sample) int64 {
		var n int64
		for _, c := range sm.pgConns {
			n += c
		}
		return n
	})
	for _, a := range slices.Sorted(maps.Keys(apps)) {
		col("postgres connections "+a, 0.25, 5, true, func(sm sample) int64 { return sm.pgConns[a] })
	}
	// River deletes finished jobs 5 min after they finish: judged once the middle third
	// starts after that window has filled (duration ≥ 20 min).
	long := dur >= 20*time.Minute
	col("river finished jobs (rows)", 0.25, 200, long, func(sm sample) int64 { return sm.doneJobs })
	col("orchestrator.river_job (KiB)", 0.25, 512, long, func(sm sample) int64 { return sm.tables["orchestrator.river_job"] / 1024 })
	for _, tb := range slices.Sorted(maps.Keys(tables)) {
		if tb == "orchestrator.river_job" {
			continue
		}
		col(tb+" (KiB)", 0, 0, false, func(sm sample) int64 { return sm.tables[tb] / 1024 })
	}

	fmt.Fprintf(&b, "### Soak samples (%d)\n\n| series | judged | middle third mean | last third mean | verdict | samples |\n|---|---|---:|---:|---|---|\n", len(samples))
	for _, s := range all {
		mid, last, ok := thirds(s.values)
		verdict := "reported"
		switch {
		case !ok:
			verdict = "too few samples"
		case s.judge && last > mid*(1+s.ratio)+s.slack:
			verdict = "**GROWS**"
			res.grew = append(res.grew, fmt.Sprintf("%s: middle third mean %.1f, last third mean %.1f (tolerance +%.0f%% +%.0f): %v", s.name, mid, last, s.ratio*100, s.slack, s.values))
		case s.judge:
			verdict = "level"
		}
		vals := make([]string, len(s.values))
		for i, x := range s.values {
			vals[i] = strconv.FormatInt(x, 10)
		}
		fmt.Fprintf(&b, "| %s | %v | %.1f | %.1f | %s | %s |\n", s.name, s.judge, mid, last, verdict, strings.Join(vals, " "))
	}
	res.markdown = b.String()
	return res
}
