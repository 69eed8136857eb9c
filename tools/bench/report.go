package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// resultsHeader opens a results file that does not exist yet.
const resultsHeader = `# Benchmark results

Appended by ` + "`make bench`" + ` (tools/bench), one section per run: the machine, the commit, the
pgbench baseline of tools/bench/pgbench-step.sh (one insert + one update per transaction, the
least a durable step commits) and one row per scenario phase. Latencies are in ms, measured
open-loop from each request's scheduled send time; errors are transport errors / unexpected
status codes. These machines drift ±20% within minutes: compare rows within one section, never
across sections.
`

// report is one run, as it goes into the results file.
type report struct {
	when     time.Time
	commit   string
	machine  string
	setup    string
	baseline baselineResult
	results  []Result
	failures []error
}

// section is the Markdown appended to the results file for this run.
func (r report) section() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s — %s\n\n", r.when.Format("2006-01-02 15:04 UTC"), r.commit)
	fmt.Fprintf(&b, "Machine: %s\n\n", r.machine)
	fmt.Fprintf(&b, "Load: %s\n\n", r.setup)
	b.WriteString("Baseline (pgbench-step.sh, 10 s per client count):\n\n")
	if r.baseline.note != "" {
		fmt.Fprintf(&b, "    %s\n", r.baseline.note)
	}
	for _, l := range r.baseline.lines {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	b.WriteString("\n")
	b.WriteString(r.table())
	b.WriteString("\nNumbers are comparable only within this run: the machine drifts ±20%.\n")
	return b.String()
}

// table is the Markdown table of the results, with the notes and failures under it. It is
// also what bench prints.
func (r report) table() string {
	var b strings.Builder
	b.WriteString("| scenario | phase | target rate | achieved rate | n | transport errors | status errors | p50 ms | p90 ms | p99 ms | max ms |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.results {
		fmt.Fprintf(&b, "| %s | %s | %.0f/s | %.1f/s | %d | %d | %d | %s | %s | %s | %s |\n",
			res.Scenario, res.Phase, res.TargetRate, res.AchievedRate, res.N,
			res.TransportErrors, res.StatusErrors,
			millis(res.P50), millis(res.P90), millis(res.P99), millis(res.Max))
	}
	var notes []string
	for _, res := range r.results {
		if res.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s\n", res.Scenario, res.Note))
		}
	}
	measured := false
	for _, res := range r.results {
		if res.CPU != nil {
			measured = true
			ops := res.N - res.TransportErrors - res.StatusErrors
			notes = append(notes, fmt.Sprintf("- %s, %s: %s\n", res.Scenario, res.Phase, cpuLine(res.CPU, ops)))
		}
	}
	if measured {
		notes = append(notes, "- "+cpuNote+"\n")
	}
	for _, res := range r.results {
		if res.FirstError != "" {
			notes = append(notes, fmt.Sprintf("- %s, %s: first failed request: %s\n",
				res.Scenario, res.Phase, strings.Join(strings.Fields(clip(res.FirstError, 300)), " ")))
		}
	}
	for _, err := range r.failures {
		notes = append(notes, fmt.Sprintf("- FAILED %v\n", err))
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		b.WriteString(strings.Join(notes, ""))
	}
	return b.String()
}

func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// appendReport adds r to the results file at path, creating it with its header first.
func appendReport(path string, r report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	head := ""
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		head = resultsHeader
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(head + r.section())
	return errors.Join(err, f.Close())
}

// gitCommit names the code measured: the short commit, with -dirty when the tree has
// uncommitted changes (then the numbers belong to no commit exactly).
func gitCommit(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown commit"
	}
	commit := strings.TrimSpace(string(out))
	status, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain").Output()
	if err != nil || len(strings.TrimSpace(string(status))) > 0 {
		commit += "-dirty"
	}
	return commit
}

// readMachine describes this machine in one line: CPU model, cores, memory, Go version.
func readMachine() string {
	cpu := "unknown CPU"
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		cpu = v
	}
	mem := "unknown memory"
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		mem = formatMemTotal(v)
	}
	return fmt.Sprintf("%s, %d cores, %s RAM, %s %s/%s",
		cpu, runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// procField returns the value of the first "key : value" line of a /proc file.
func procField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// formatMemTotal turns /proc/meminfo's "16318464 kB" into "15.6 GiB".
func formatMemTotal(v string) string {
	kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%.1f GiB", kb/(1<<20))
}
