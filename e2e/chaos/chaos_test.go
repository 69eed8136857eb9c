package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestChaos runs the mixed workload through the gateway while faults are injected one after
// the other: kill -9 and restart of every process (two run-orchestrator replicas), a Postgres
// restart, Redis FLUSHALL, Redis stopped and started, and cuts between services through TCP
// proxies. Then it waits for the system to settle and checks invariants only, never timings:
// every accepted run ends as its definition implies, none is stuck, no step's side effect
// happens twice unless an attempt was lost, one run per (schedule, cutoff) and per webhook
// id, each accepted signal consumed once, one of N same-version patches applied, and every
// 5xx the client saw a 503 inside a fault window. The table goes to the log, and to
// SVC_CHAOS_REPORT (markdown) when set.
//
// SVC_CHAOS_DURATION sets how long faults are injected (make chaos: 10m), cycling through the
// list; unset (make test), one pass of the list in about 65 s.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: starts the whole system on private servers")
	}
	long := time.Duration(0)
	if v := os.Getenv("SVC_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SVC_CHAOS_DURATION=%q: want a positive duration such as 10m", v)
		}
		long = d
	}
	// Short: holds and gaps small enough for one pass in ~65 s; long: longer outages, and
	// room between faults for the system to show it recovered.
	hold, gap, warm, cool, workers := 1200*time.Millisecond, 2*time.Second, 3*time.Second, 4*time.Second, 4
	if long > 0 {
		hold, gap, warm, cool, workers = 3*time.Second, 8*time.Second, 10*time.Second, 10*time.Second, 4
	}

	t0 := time.Now()
	built := commit() // the binaries are built from this checkout now
	s := setup(t, stackOptions{logLevel: "info"})
	s.schedules(3)
	t.Logf("set-up (build, private servers, system, user, workflows) took %s", time.Since(t0).Round(time.Second))
	led := newLedger()
	bg, cancelBG := context.WithCancel(context.Background())
	t.Cleanup(cancelBG)
	w := &workload{s: s, led: led, bg: bg}
	started := time.Now()
	w.finishWithin(24 * time.Hour) // until the stop below

	ctx, stop := context.WithCancel(bg)
	wait := w.start(ctx, workers, 150*time.Millisecond)
	flog := &faultLog{}
	time.Sleep(warm) // the workload runs without faults first
	faults := s.faults()
	for pass := 0; ; pass++ {
		for _, f := range faults {
			t.Logf("+%s fault: %s", time.Since(started).Round(time.Second), f.name)
			flog.run(f, hold)
			time.Sleep(gap) // the workload runs between faults
		}
		if long == 0 || time.Since(started) > long+warm {
			break
		}
	}
	time.Sleep(cool) // the workload runs on after the last fault
	stop()
	w.finishWithin(45 * time.Second)
	wait()
	workEnded := time.Now()
	t.Logf("workload ran %s; %d runs accepted; settling", workEnded.Sub(started).Round(time.Second), len(led.runs))

	vctx, cancel := context.WithTimeout(bg, 5*time.Minute)
	defer cancel()
	v := s.verify(vctx, led, flog.all(), 90*time.Second)
	t.Logf("settling and checks took %s", time.Since(workEnded).Round(time.Second))
	var scen []string
	for _, sc := range scenarios {
		if c, ok := w.stats.Load(sc.name); ok {
			scen = append(scen, fmt.Sprintf("%s %d", sc.name, c.(interface{ Load() int64 }).Load()))
		}
	}
	v.figures = append([][2]string{
		{"date, commit", time.Now().UTC().Format("2006-01-02 15:04 UTC") + ", " + built},
		{"workload", fmt.Sprintf("%s, %d workers: %s", workEnded.Sub(started).Round(time.Second), workers, strings.Join(scen, ", "))},
		{"faults injected", fmt.Sprint(len(flog.all()))},
	}, v.figures...)
	title := "Chaos run (" + workEnded.Sub(started).Round(time.Second).String() + ")"
	v.publish(t, v.markdown(title, started), "SVC_CHAOS_REPORT")
}

// schedules creates n schedules of the tick workflow that fire every minute.
func (s *stack) schedules(n int) {
	ctx := setupCtx(s.t)
	for i := range n {
		s.must(s.api.call(ctx, "setup", "POST", "/api/schedules", map[string]any{
			"workflowId": s.wf["tick"], "cron": "* * * * *", "input": map[string]any{"n": i},
		}, true), 201, "create schedule")
	}
}

// commit is the checked-out commit, for the report.
func commit() string {
	out, err := execOutput("git", "rev-parse", "--short", "HEAD")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(out)
}
