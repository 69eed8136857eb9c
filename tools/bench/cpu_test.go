package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// Fields after comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
	// utime stime cutime cstime priority nice threads itrealvalue starttime vsize …
	tests := []struct {
		name string
		line string
		want procStat
		ok   bool
	}{
		{"Plain", "4242 (postgres) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 9 20 0 1 0 98765 1234567 89\n",
			procStat{pid: 4242, comm: "postgres", ppid: 1, ticks: 300, start: 98765}, true},
		{"CommWithSpacesAndParens", "123 (my (odd) proc) S 77 123 123 0 -1 0 0 0 0 0 11 22 33 44 20 0 1 0 555 0 0",
			procStat{pid: 123, comm: "my (odd) proc", ppid: 77, ticks: 33, start: 555}, true},
		{"CommEndingInParenAndDigits", "9 (a) 1 2 3) R 8 0 0 0 0 0 0 0 0 0 5 6 0 0 0 0 0 0 7",
			procStat{pid: 9, comm: "a) 1 2 3", ppid: 8, ticks: 11, start: 7}, true},
		{"TruncatedBeforeStarttime", "123 (x) S 1 0 0 0 0 0 0 0 0 0 5 6 0 0 0 0 0", procStat{}, false},
		{"NotANumber", "123 (x) S 1 0 0 0 0 0 0 0 0 0 five 6 0 0 0 0 0 0 7", procStat{}, false},
		{"NoPid", "(x) S 1 0 0 0 0 0 0 0 0 0 5 6 0 0 0 0 0 0 7", procStat{}, false},
		{"Garbage", "nonsense", procStat{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseProcStat(tt.line)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("ThisProcess", func(t *testing.T) {
		t.Parallel()
		b, err := os.ReadFile("/proc/self/stat")
		if err != nil {
			t.Skip("no /proc here")
		}
		got, ok := parseProcStat(string(b))
		require.True(t, ok)
		require.Equal(t, os.Getpid(), got.pid)
		require.Equal(t, os.Getppid(), got.ppid)
		require.Positive(t, got.start)
	})
}

func TestGroupOf(t *testing.T) {
	t.Parallel()
	services := map[int]string{20: "run-orchestrator"}
	require.Equal(t, "bench", groupOf(procStat{pid: 10, comm: "bench"}, 10, services))
	require.Equal(t, "postgres", groupOf(procStat{pid: 11, comm: "postgres"}, 10, services))
	require.Equal(t, "redis-server", groupOf(procStat{pid: 12, comm: "redis-server"}, 10, services))
	// comm is cut at 15 characters; the service's name comes from its executable.
	require.Equal(t, "run-orchestrator", groupOf(procStat{pid: 20, comm: "run-orchestrato"}, 10, services))
	require.Empty(t, groupOf(procStat{pid: 21, comm: "run-orchestrato"}, 10, services), "not below bench: not measured")
	require.Empty(t, groupOf(procStat{pid: 22, comm: "bash"}, 10, services))
}

func TestCPUDelta(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	snap := func(at time.Time, procs ...any) cpuSnapshot {
		s := cpuSnapshot{at: at, ticks: map[procKey]int64{}, group: map[procKey]string{}}
		for i := 0; i < len(procs); i += 3 {
			k := procs[i].(procKey)
			s.group[k], s.ticks[k] = procs[i+1].(string), int64(procs[i+2].(int))
		}
		return s
	}
	pg1, pg2, pgGone, pgNew := procKey{100, 1}, procKey{101, 1}, procKey{102, 1}, procKey{103, 900}
	orch, orchReused := procKey{200, 5}, procKey{200, 950} // the same pid, a later process
	bench := procKey{300, 2}
	begin := snap(t0,
		pg1, "postgres", 1000,
		pg2, "postgres", 50,
		pgGone, "postgres", 70,
		orch, "run-orchestrator", 400,
		bench, "bench", 10)
	end := snap(t0.Add(10*time.Second),
		pg1, "postgres", 1300, // +300
		pg2, "postgres", 50, // +0
		pgNew, "postgres", 25, // new: counted whole
		orchReused, "run-orchestrator", 40, // new process on a reused pid: counted whole
		bench, "bench", 110) // +100

	u := cpuDelta(begin, end, 100)
	require.Equal(t, 10*time.Second, u.Window)
	require.Equal(t, []procCPU{
		{Name: "postgres", Procs: 4, CPU: 3250 * time.Millisecond},
		{Name: "bench", Procs: 1, CPU: time.Second},
		{Name: "run-orchestrator", Procs: 2, CPU: 400 * time.Millisecond},
	}, u.Groups)
	require.Equal(t, 2, u.Started)
	require.Equal(t, 2, u.Ended, "pgGone and the orchestrator whose pid was reused")
	require.Equal(t, 4650*time.Millisecond, u.Total())

	t.Run("GroupThatOnlyEndedStaysVisible", func(t *testing.T) {
		t.Parallel()
		u := cpuDelta(snap(t0, orch, "run-orchestrator", 5), snap(t0.Add(time.Second)), 100)
		require.Equal(t, []procCPU{{Name: "run-orchestrator", Procs: 1, CPU: 0}}, u.Groups)
		require.Equal(t, 1, u.Ended)
	})
	t.Run("OtherTickRate", func(t *testing.T) {
		t.Parallel()
		u := cpuDelta(snap(t0, bench, "bench", 0), snap(t0.Add(time.Second), bench, "bench", 250), 250)
		require.Equal(t, time.Second, u.Total())
	})
}

func TestCPULine(t *testing.T) {
	t.Parallel()
	u := &cpuUse{
		Per:    "run",
		Window: 10 * time.Second,
		Groups: []procCPU{
			{Name: "postgres", Procs: 12, CPU: 5620 * time.Millisecond},
			{Name: "run-orchestrator", Procs: 1, CPU: 3040 * time.Millisecond},
			{Name: "gateway", Procs: 1, CPU: 1220 * time.Millisecond},
			{Name: "scheduler", Procs: 1, CPU: 0},
		},
	}
	require.Equal(t,
		"cpu per run: postgres 2.81 ms, run-orchestrator 1.52, gateway 0.61, scheduler 0.00, total 4.94 ms (2000 runs; 0.99 cores over 10.0 s)",
		cpuLine(u, 2000))

	u.Started, u.Ended = 3, 1
	require.True(t, strings.HasSuffix(cpuLine(u, 2000), "10.0 s; 3 processes started in the window (counted whole); 1 ended in it (their CPU in the window lost))"), cpuLine(u, 2000))
	u.Started = 0
	require.True(t, strings.HasSuffix(cpuLine(u, 2000), "10.0 s; 1 ended in it (their CPU in the window lost))"), cpuLine(u, 2000))

	u.Per = ""
	require.True(t, strings.HasPrefix(cpuLine(u, 1), "cpu per request: postgres 5620.00 ms,"), cpuLine(u, 1))
	require.Equal(t, "cpu per request: not computed, no request completed in the window (total 9880.00 ms over 10.0 s)", cpuLine(u, 0))
}

func TestReportCPULines(t *testing.T) {
	t.Parallel()
	use := &cpuUse{Per: "run", Window: 5 * time.Second, Groups: []procCPU{{Name: "postgres", Procs: 3, CPU: 900 * time.Millisecond}}}
	r := report{results: []Result{
		{Scenario: "run-start", Phase: "POST /run", Stats: Stats{N: 1000, StatusErrors: 100, CPU: use}},
		{Scenario: "run-start", Phase: "derived row", Stats: Stats{N: 1000}},
	}}
	table := r.table()
	// n minus the errors: 900 runs.
	require.Contains(t, table, "- run-start, POST /run: cpu per run: postgres 1.00 ms, total 1.00 ms (900 runs; 0.18 cores over 5.0 s)\n")
	require.NotContains(t, table, "derived row: cpu")
	require.Contains(t, table, cpuNote)

	require.NotContains(t, report{results: []Result{{Scenario: "x", Stats: Stats{N: 1}}}}.table(), cpuNote)
}

func TestGeneratorMeasuresCPU(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Some CPU in this process, so bench's group has something to show.
		deadline := time.Now().Add(2 * time.Millisecond)
		for time.Now().Before(deadline) {
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	gen := NewGenerator(newHTTPClient(8), 8)
	meter := &cpuMeter{self: os.Getpid(), hz: 100}
	st, err := gen.Run(context.Background(), Phase{
		Target: Target{URL: srv.URL, Expect: http.StatusAccepted, Per: "run"},
		Rate:   200, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, CPU: meter,
	})
	require.NoError(t, err)
	require.NotNil(t, st.CPU)
	require.Equal(t, "run", st.CPU.Per)
	require.InDelta(t, 400*time.Millisecond, st.CPU.Window, float64(300*time.Millisecond), "the measured window, not the warm-up")
	var names []string
	for _, g := range st.CPU.Groups {
		names = append(names, g.Name)
	}
	require.Contains(t, names, "bench")
	require.Positive(t, st.CPU.Total())

	st, err = gen.Run(context.Background(), Phase{Target: Target{URL: srv.URL, Expect: http.StatusAccepted}, Rate: 100, Duration: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Nil(t, st.CPU, "no meter, no measurement")
}
