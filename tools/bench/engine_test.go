package main

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestScenarioNamesUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, name := range scenarioNames(allScenarios()) {
		require.False(t, seen[name], "scenario %s listed twice", name)
		seen[name] = true
	}
	for _, name := range []string{"run-start-max", "chain-40-10ms", "chain-400", "step-rate", "first-attempt", "closed-loop-16", "sleep-lateness", "signal-resume", "waiting-rss", "webhook-delivery", "event-latency"} {
		require.True(t, seen[name], "%s is in allScenarios", name)
	}
}

func TestRateLadder(t *testing.T) {
	t.Parallel()
	step := func(rate, achieved float64, p99 time.Duration, errs int) Stats {
		return Stats{TargetRate: rate, AchievedRate: achieved, N: int(rate * 5), P99: p99, StatusErrors: errs}
	}
	bound := 100 * time.Millisecond

	t.Run("Held", func(t *testing.T) {
		t.Parallel()
		require.True(t, stepHeld(step(200, 200, 10*time.Millisecond, 0), bound))
		require.True(t, stepHeld(step(200, 191, bound, 0), bound), "p99 at the bound and 95.5% achieved hold")
	})
	t.Run("Missed", func(t *testing.T) {
		t.Parallel()
		require.False(t, stepHeld(step(200, 200, bound+time.Microsecond, 0), bound), "p99 over the bound")
		require.False(t, stepHeld(step(200, 200, time.Millisecond, 1), bound), "an error")
		require.False(t, stepHeld(step(1000, 900, time.Millisecond, 0), bound), "fell behind the schedule")
		require.False(t, stepHeld(Stats{TargetRate: 200}, bound), "nothing measured")
	})
	t.Run("Best", func(t *testing.T) {
		t.Parallel()
		ladder := []Stats{
			step(200, 200, 5*time.Millisecond, 0),
			step(400, 400, 9*time.Millisecond, 0),
			step(600, 590, 150*time.Millisecond, 0),
			step(800, 800, 9*time.Millisecond, 0), // after a miss: not counted
		}
		require.InDelta(t, 400, bestHeld(ladder, bound), 0)
		require.InDelta(t, 0, bestHeld(ladder[2:], bound), 0, "the first step missed")
		require.InDelta(t, 0, bestHeld(nil, bound), 0)
	})
	t.Run("Ladder", func(t *testing.T) {
		t.Parallel()
		ladder := runStartSteps()
		require.Contains(t, ladder, 1000.0, "the target is a step")
		for i := 1; i < len(ladder); i++ {
			require.Greater(t, ladder[i], ladder[i-1], "the ladder goes up")
		}
	})
}

func ptr(s string) *string { return &s }

func TestPgbenchTPS(t *testing.T) {
	t.Parallel()
	lines := []string{
		"pgbench clients=1 tps=2510.123 p50_ms=0.380 p99_ms=0.900",
		"pgbench clients=4 tps=6020.5 p50_ms=0.610 p99_ms=1.800",
	}
	tps, ok := pgbenchTPS(lines, 1)
	require.True(t, ok)
	require.InDelta(t, 2510.123, tps, 1e-9)
	tps, ok = pgbenchTPS(lines, 4)
	require.True(t, ok)
	require.InDelta(t, 6020.5, tps, 1e-9)
	_, ok = pgbenchTPS(lines, 16)
	require.False(t, ok, "not measured")
	_, ok = pgbenchTPS([]string{"pgbench clients=1 tps= p50_ms=1"}, 1)
	require.False(t, ok, "empty tps")
	_, ok = pgbenchTPS(nil, 1)
	require.False(t, ok)
}

func TestAttemptsIn(t *testing.T) {
	t.Parallel()
	at := func(ms int) string {
		return time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
	}
	base := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)
	items := []attemptView{
		{BlockID: "b0", StartedAt: at(990), FinishedAt: ptr(at(999))},   // before the window
		{BlockID: "b1", StartedAt: at(999), FinishedAt: ptr(at(1000))},  // on its start: in
		{BlockID: "b2", StartedAt: at(1500), FinishedAt: ptr(at(1503))}, // in
		{BlockID: "b3", StartedAt: at(1999), FinishedAt: ptr(at(2000))}, // on its end: out
		{BlockID: "b4", StartedAt: at(1999)},                            // still running
	}
	got := attemptsIn(items, base.Add(time.Second), base.Add(2*time.Second))
	require.Equal(t, []time.Duration{time.Millisecond, 3 * time.Millisecond}, got)

	first, ok := firstStart(items)
	require.True(t, ok)
	require.Equal(t, base.Add(990*time.Millisecond), first)
	_, ok = firstStart(nil)
	require.False(t, ok)
}

func TestSleepLateness(t *testing.T) {
	t.Parallel()
	at := func(ms int) string {
		return time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
	}
	items := []attemptView{
		{BlockID: "b0", Status: "succeeded", StartedAt: at(0), FinishedAt: ptr(at(1))},
		{BlockID: "b1", Status: "succeeded", StartedAt: at(2), FinishedAt: ptr(at(209)), Output: json.RawMessage(`{"slept_ms":205}`)},
		{BlockID: "b2", Status: "succeeded", StartedAt: at(211), FinishedAt: ptr(at(212))},
	}
	l, ok := sleepLatenessOf(items, "b1", "b2", 200*time.Millisecond)
	require.True(t, ok)
	require.Equal(t, 7*time.Millisecond, l.released, "209 − (2 + 200)")
	require.Equal(t, 9*time.Millisecond, l.next, "211 − (2 + 200)")
	require.True(t, l.hasSlept)
	require.Equal(t, 5*time.Millisecond, l.slept)

	early := []attemptView{
		{BlockID: "b1", Status: "succeeded", StartedAt: at(2), FinishedAt: ptr(at(201)), Output: json.RawMessage(`{"timed_out":true}`)},
		{BlockID: "b2", Status: "succeeded", StartedAt: at(202)},
	}
	l, ok = sleepLatenessOf(early, "b1", "b2", 200*time.Millisecond)
	require.True(t, ok)
	require.Equal(t, -time.Millisecond, l.released, "a millisecond early reads negative, not clamped")
	require.False(t, l.hasSlept)

	_, ok = sleepLatenessOf(items[:2], "b1", "b2", 200*time.Millisecond)
	require.False(t, ok, "no next block")
	running := []attemptView{{BlockID: "b1", Status: "running", StartedAt: at(2)}, items[2]}
	_, ok = sleepLatenessOf(running, "b1", "b2", 200*time.Millisecond)
	require.False(t, ok, "the wait has not ended")
}

func TestLinearOps(t *testing.T) {
	t.Parallel()
	ops := linearOps(
		map[string]any{"type": "wait", "params": map[string]any{"signal": "go"}},
		map[string]any{"type": "log", "params": map[string]any{"message": "x"}},
	)
	require.Equal(t, []map[string]any{
		{"operation_type": "add", "block_id": "b0", "type": "trigger.manual"},
		{"operation_type": "add", "block_id": "b1", "type": "wait", "params": map[string]any{"signal": "go"}},
		{"operation_type": "add", "block_id": "b2", "type": "log", "params": map[string]any{"message": "x"}},
		{"operation_type": "connect", "block_id": "b0", "target_block_id": "b1"},
		{"operation_type": "connect", "block_id": "b1", "target_block_id": "b2"},
	}, ops)
	require.Len(t, chainOps(400), 799, "chain-400 needs two patches of at most 500 ops")
}

func TestDescendants(t *testing.T) {
	t.Parallel()
	// 1 → bench 10 → go run 11 → devstack 12 → orchestrator 13, gateway 14; 20 is make run's.
	parents := map[int]int{10: 1, 11: 10, 12: 11, 13: 12, 14: 12, 20: 1, 21: 20}
	require.Equal(t, []int{11, 12, 13, 14}, slices.Sorted(slices.Values(descendants(parents, 10))))
	require.Empty(t, descendants(parents, 13))
}

func TestProcMemory(t *testing.T) {
	t.Parallel()
	b, err := parseKB("123456 kB")
	require.NoError(t, err)
	require.Equal(t, int64(123456*1024), b)
	for _, bad := range []string{"", "12 MB", "x kB", "1 2 kB"} {
		_, err := parseKB(bad)
		require.Error(t, err, "%q", bad)
	}
	require.InDelta(t, 150.0, megabytes(150_000_000), 1e-9)

	// This process has a VmRSS, and an exe name.
	rss, peak, err := vmRSS(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, rss)
	require.GreaterOrEqual(t, peak, rss)
	require.NotEmpty(t, exeName(os.Getpid()))
}

func TestSleepServer(t *testing.T) {
	t.Parallel()
	srv, err := startSleepServer(10 * time.Millisecond)
	require.NoError(t, err)
	defer srv.close()
	t0 := time.Now()
	resp, err := http.Get(srv.url) //nolint:noctx // a test
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.GreaterOrEqual(t, time.Since(t0), 10*time.Millisecond)
	require.Equal(t, int64(1), srv.hits.Load())
	require.Contains(t, srv.url, "http://127.0.0.1:")
}

func TestEngineScenarioRates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/go.work", []byte("go 1.26\n"), 0o644))
	cfg, err := parseConfig(nil, func() (string, error) { return dir, nil })
	require.NoError(t, err)
	rates := ratesOf(cfg)
	require.InDelta(t, 100, rates["first-attempt"], 0, "a moderate open-loop rate")
	require.InDelta(t, 50, rates["sleep-lateness"], 0)
	require.InDelta(t, 500, rates["closed-loop-16"], 0, "not rated: -rate's default, unused")
}

func TestPerStepFinding(t *testing.T) {
	t.Parallel()
	api := func(scenario string, p50 time.Duration) Result {
		return Result{Scenario: scenario, Phase: "run createdAt → finishedAt from the API (sequential)", Stats: Stats{N: 20, P50: p50}}
	}
	long := api("chain-400", 350*time.Millisecond)
	require.Empty(t, perStepFinding(nil, long), "nothing to compare without chain-40")
	got := perStepFinding([]Result{api("chain-40", 29*time.Millisecond)}, long)
	require.Contains(t, got, "chain-40 0.725 ms, chain-400 0.875 ms, ratio 1.21")
	require.Contains(t, got, "MISSED")
	require.Contains(t, perStepFinding([]Result{api("chain-40", 40*time.Millisecond)}, long), "ratio 0.88; target (issue 13: ≤ 1.2) met")
}
