package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReport(t *testing.T) {
	t.Parallel()

	sampleReport := func() report {
		return report{
			when:     time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
			commit:   "abc1234-dirty",
			machine:  "Some CPU, 2 cores, 7.8 GiB RAM, go1.26.8 linux/amd64",
			setup:    "open loop",
			baseline: baselineResult{lines: []string{"pgbench clients=1 tps=900.1 p50_ms=1.000 p99_ms=2.000"}},
			results: []Result{
				{Scenario: "gateway-proxy", Phase: "direct to identity", Stats: Stats{
					TargetRate: 500, AchievedRate: 499.8, N: 5000, TransportErrors: 1, StatusErrors: 2,
					P50: 250 * time.Microsecond, P90: time.Millisecond, P99: 2500 * time.Microsecond, Max: 12 * time.Millisecond,
				}},
				{Scenario: "gateway-proxy", Phase: "through gateway", Note: "gateway overhead: p50 +0.100 ms",
					Stats: Stats{FirstError: "GET /x: status 500:\n  {\"error\":\"internal\"}"}},
			},
			failures: []error{errors.New("guard-reject: boom")},
		}
	}

	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		table := sampleReport().table()
		require.Contains(t, table, "| scenario | phase | target rate | achieved rate | n | transport errors | status errors | p50 ms | p90 ms | p99 ms | max ms |")
		require.Contains(t, table, "| gateway-proxy | direct to identity | 500/s | 499.8/s | 5000 | 1 | 2 | 0.250 | 1.000 | 2.500 | 12.000 |")
		require.Contains(t, table, "- gateway-proxy: gateway overhead: p50 +0.100 ms")
		require.Contains(t, table, "- FAILED guard-reject: boom")
		require.Contains(t, table, `- gateway-proxy, through gateway: first failed request: GET /x: status 500: {"error":"internal"}`+"\n", "on one line")
	})

	t.Run("Section", func(t *testing.T) {
		t.Parallel()
		sec := sampleReport().section()
		require.True(t, strings.HasPrefix(sec, "\n## 2026-03-04 05:06 UTC — abc1234-dirty\n"), sec)
		require.Contains(t, sec, "Machine: Some CPU, 2 cores")
		require.Contains(t, sec, "    pgbench clients=1 tps=900.1")
		require.Contains(t, sec, "comparable only within this run")
	})

	t.Run("MissingBaselineIsSaid", func(t *testing.T) {
		t.Parallel()
		r := sampleReport()
		r.baseline = baselineResult{note: "not measured: /x/pgbench-step.sh not found"}
		require.Contains(t, r.section(), "    not measured: /x/pgbench-step.sh not found\n")
	})

	t.Run("AppendCreatesTheHeaderOnce", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "bench", "RESULTS.md")

		require.NoError(t, appendReport(path, sampleReport()))
		require.NoError(t, appendReport(path, sampleReport()))

		b, err := os.ReadFile(path)
		require.NoError(t, err)
		got := string(b)
		require.True(t, strings.HasPrefix(got, "# Benchmark results\n"))
		require.Equal(t, 1, strings.Count(got, "# Benchmark results"))
		require.Equal(t, 2, strings.Count(got, "\n## 2026-03-04 05:06 UTC"))
	})
}

func TestFormatMemTotal(t *testing.T) {
	t.Parallel()
	require.Equal(t, "15.6 GiB", formatMemTotal("16318464 kB"))
	require.Equal(t, "garbage", formatMemTotal("garbage"))
}

func TestReadMachine(t *testing.T) {
	t.Parallel()
	m := readMachine()
	require.Contains(t, m, " cores, ")
	require.Contains(t, m, "go1.")
}
