package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// baselineResult is what pgbench-step.sh measured, or why there is nothing: a run without a
// baseline still reports its scenarios, and says plainly that the baseline is missing.
type baselineResult struct {
	lines []string // "pgbench clients=N tps=… p50_ms=… p99_ms=…"
	note  string   // set when lines are missing: skipped, script not found, script failed
}

// runBaseline runs the pgbench baseline script for each client count, perRun each. A missing
// script or a failing one is reported in the result, not as an error, so the scenarios of the
// run are not lost over it; only ctx ending is an error.
func runBaseline(ctx context.Context, script string, clients []string, perRun time.Duration) (baselineResult, error) {
	if _, err := os.Stat(script); errors.Is(err, fs.ErrNotExist) {
		return baselineResult{note: "not measured: " + script + " not found"}, nil
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, clients...)...)
	cmd.Env = withEnv(os.Environ(), map[string]string{
		"SECONDS_PER_RUN": fmt.Sprint(int(perRun.Seconds())),
		"PATH":            pgPath(os.Getenv("PATH")),
	})
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// pgbench runs as a grandchild; a group of its own lets Ctrl-C stop it with the script.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return baselineResult{}, ctx.Err()
	}
	lines := parseBaseline(stdout.String())
	if err != nil || len(lines) == 0 {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:] // the last line says what went wrong; the rest is noise
		}
		return baselineResult{lines: lines, note: fmt.Sprintf("failed: %v: %s", err, msg)}, nil
	}
	return baselineResult{lines: lines}, nil
}

// parseBaseline keeps the result lines of the script's output.
func parseBaseline(out string) []string {
	var lines []string
	for l := range strings.Lines(out) {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "pgbench clients=") {
			lines = append(lines, l)
		}
	}
	return lines
}

// pgPath puts the PostgreSQL client programs ahead of path: Debian installs pgbench under
// /usr/lib/postgresql/<version>/bin (newest version first here), source builds under
// /usr/local/bin.
func pgPath(path string) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	dirs = append(dirs, "/usr/local/bin")
	if path != "" {
		dirs = append(dirs, path)
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// versionOf reads the major version out of /usr/lib/postgresql/<version>/bin; 0 if none.
func versionOf(dir string) int {
	v := 0
	for _, c := range filepath.Base(filepath.Dir(dir)) {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int(c-'0')
	}
	return v
}
