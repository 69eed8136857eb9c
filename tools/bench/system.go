package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// systemEnv places every service of the benchmarked system on ports of its own (180xx), so it
// never collides with a `make run` on the default ones. Devstack derives each SVC_*_URL its
// peers dial from these addresses, provided none is set: devstack keeps a SVC_*_URL a user
// exported for `make run`, and a service here would then call a peer of that system, so they
// are blanked (devstack reads an empty value as unset). warn keeps a log line per request out
// of the measurement. The scenarios sign up through identity with benchOrigin, so it is
// trusted, and they send hundreds of requests a second with one key, so the gateway's buckets
// get the largest capacity it accepts (a million a minute, over 16,000 a second): none empties
// during a run, and the limiter still takes its token in Redis on every request.
func systemEnv() map[string]string {
	return map[string]string{
		"SVC_TRUSTED_ORIGINS":       benchOrigin,
		"SVC_RATE_LIMIT_PER_MINUTE": "1000000",
		// event-latency holds one event stream open per run it starts, with one key: the cap on
		// a principal's open streams (20 by default) gets the largest value the gateway accepts.
		"SVC_GATEWAY_MAX_STREAMS": "100000",
		"SVC_IDENTITY_URL":        "",
		"SVC_EDITOR_URL":          "",
		"SVC_ORCHESTRATOR_URL":    "",
		"SVC_SCHEDULER_URL":       "",
		"SVC_WEBHOOK_URL":         "",
		"SVC_PUBLIC_ADDR":         "127.0.0.1:18080",
		"SVC_GATEWAY_ADMIN_ADDR":  "127.0.0.1:18090",
		"SVC_IDENTITY_ADDR":       "127.0.0.1:18081",
		"SVC_EDITOR_ADDR":         "127.0.0.1:18082",
		"SVC_ORCHESTRATOR_ADDR":   "127.0.0.1:18083",
		"SVC_SCHEDULER_ADDR":      "127.0.0.1:18084",
		"SVC_WEBHOOK_ADDR":        "127.0.0.1:18085",
		"SVC_LOG_LEVEL":           "warn",
		// chain-40-10ms's http.request blocks call a server of bench's on loopback.
		"SVC_HTTP_ALLOW_PRIVATE": "1",
		// depth loads months of finished runs and measures the reads over them: none may be
		// swept before its sweep phase, which sets an organization's shorter period itself.
		"SVC_RUN_RETENTION": "87600h",
		// schedule-tick times one admin tick: the built-in ticker would take part of its work.
		"SVC_SCHEDULER_TICK": "0",
	}
}

// withEnv returns parent with overrides applied, in a stable order.
func withEnv(parent []string, overrides map[string]string) []string {
	out := make([]string, 0, len(parent)+len(overrides))
	for _, kv := range parent {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := overrides[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		out = append(out, k+"="+overrides[k])
	}
	return out
}

// systemSpec says how to start the system.
type systemSpec struct {
	root      string        // repository root; devstack runs there
	env       []string      // bench's environment; systemEnv is applied on top
	healthURL string        // answers 200 once every service is up (the gateway starts last)
	timeout   time.Duration // for building and starting everything
	output    io.Writer     // devstack's output goes here, each line prefixed
}

// system is a running devstack.
type system struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once devstack has exited and its output is drained
	err    error         // why it exited; read after exited is closed
	tail   *tailBuffer
}

// startSystem runs `go run ./tools/devstack` and waits until healthURL answers 200. On error
// nothing is left running.
func startSystem(ctx context.Context, spec systemSpec) (*system, error) {
	if err := checkFree(spec.healthURL); err != nil {
		return nil, err
	}
	tail := &tailBuffer{max: 40}
	out := &prefixWriter{prefix: "devstack | ", w: spec.output, tail: tail}
	cmd := exec.Command("go", "run", "./tools/devstack")
	cmd.Dir = spec.root
	cmd.Env = withEnv(spec.env, systemEnv())
	cmd.Stdout = out
	cmd.Stderr = out
	// Its own process group keeps the terminal's Ctrl-C away from it (bench stops it in
	// order) and lets one signal reach both `go run` and the devstack binary it runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("go run ./tools/devstack: %w", err)
	}
	s := &system{cmd: cmd, exited: make(chan struct{}), tail: tail}
	go func() {
		// Wait returns once `go run` has exited and the output pipe is closed: the devstack
		// binary holds the pipe until it has stopped every service, even when `go run` itself
		// was killed. That makes this the moment devstack is really gone.
		s.err = cmd.Wait()
		out.flush()
		close(s.exited)
	}()

	err := waitHealthy(ctx, spec.healthURL, spec.timeout, s.exited)
	if err == nil {
		return s, nil
	}
	if serr := s.stop(time.Minute); serr != nil {
		err = errors.Join(err, serr)
	}
	return nil, fmt.Errorf("%w\nlast devstack output:\n%s", err, tail.String())
}

// waitHealthy polls url until it answers 200, devstack exits, or the deadline or ctx ends.
// The interval grows from 100ms to 1s: the first start builds six services, later ones take
// seconds.
func waitHealthy(ctx context.Context, url string, timeout time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	interval := 100 * time.Millisecond
	var last error
	for {
		if last = probeOK(ctx, client, url, nil); last == nil {
			return nil
		}
		timer := time.NewTimer(interval)
		select {
		case <-exited:
			timer.Stop()
			return errors.New("devstack exited before the system was up")
		case <-ctx.Done():
			timer.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not answer 200 within %s (last: %w)", url, timeout, last)
			}
			return ctx.Err()
		case <-timer.C:
		}
		interval = min(interval*2, time.Second)
	}
}

// probeOK fails unless a GET of url with header (may be nil) answers 200 within client's
// timeout.
func probeOK(ctx context.Context, client *http.Client, url string, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	maps.Copy(req.Header, header)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, clip(string(b), 300))
	}
	return nil
}

// checkFree fails when something already listens where the system is to answer: it would pass
// the health check in place of the system bench starts, and be measured instead.
func checkFree(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return fmt.Errorf("%s is taken (an earlier bench still running?): %w", u.Host, err)
	}
	return ln.Close()
}

// stop sends SIGTERM to devstack and waits for it to exit; devstack stops the services, which
// live in process groups of their own. The signal goes to the devstack binary that `go run`
// started, not to `go run`: that one would die at once and leave devstack unreaped, while left
// alive it waits for devstack and exits with its status. Before the binary exists (still
// compiling) the whole group gets it. After wait the group is killed.
func (s *system) stop(wait time.Duration) error {
	pgid := s.cmd.Process.Pid
	if kids := childrenOf(pgid); len(kids) > 0 {
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	} else {
		_ = syscall.Kill(-pgid, syscall.SIGTERM) // ESRCH: already gone, which is what we want
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-s.exited:
		return nil
	case <-timer.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.exited
	return fmt.Errorf("devstack did not stop within %s and was killed; its services may still be running", wait)
}

// childrenOf lists the processes whose parent is pid, from /proc; none where there is no /proc.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // it exited while we looked
		}
		if ppid, ok := parentPID(string(b)); ok && ppid == pid {
			kid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			if err == nil {
				kids = append(kids, kid)
			}
		}
	}
	return kids
}

// parentPID reads the parent's pid out of a /proc/<pid>/stat line: "pid (comm) state ppid …".
// comm may hold spaces and parentheses, so the fields are counted from the last ')'.
func parentPID(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// prefixWriter writes whole lines to w, each with prefix, and keeps the last ones in tail for
// the error message when the system does not come up.
type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	tail   *tailBuffer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(string(p.buf[:i]))
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.line(string(p.buf))
		p.buf = nil
	}
}

func (p *prefixWriter) line(l string) {
	p.tail.add(l)
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, l)
}

// tailBuffer keeps the last max lines.
type tailBuffer struct {
	max   int
	lines []string
}

func (t *tailBuffer) add(l string) {
	t.lines = append(t.lines, l)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailBuffer) String() string {
	var sb strings.Builder
	for _, l := range t.lines {
		sb.WriteString("  " + l + "\n")
	}
	return sb.String()
}
