package harness

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc.dev/libs/testkit"
)

// Redis is a private redis-server of one test on a free port, without persistence, that the
// test may flush, stop and start again on the same address. It is stopped when the test ends.
type Redis struct {
	// Addr is host:port; URL the redis:// URL services are given.
	Addr string
	URL  string

	bin  string
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a private server.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("harness: no redis-server on PATH: %v", err)
	}
	dir, err := os.MkdirTemp("", "svc-redis-")
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	r := &Redis{bin: bin, dir: dir}
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	r.URL = "redis://" + r.Addr + "/0"
	t.Cleanup(func() {
		r.Stop(t)
		_ = os.RemoveAll(dir)
	})
	r.Start(t)
	return r
}

// Start runs the server (again) on its address and waits until it answers PING.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		t.Fatalf("harness: redis already running")
	}
	_, port, _ := net.SplitHostPort(r.Addr)
	cmd := exec.Command(r.bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--loglevel", "warning", "--maxclients", "2000")
	cmd.Dir = r.dir
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("harness: start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r.cmd, r.done = cmd, done
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := r.Do("PING"); err == nil {
			return
		}
		select {
		case <-done:
			r.cmd = nil
			t.Fatalf("harness: redis-server exited during start-up:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness: redis-server does not answer on %s:\n%s", r.Addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s); its data is gone.
func (r *Redis) Stop(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// FlushAll empties the server.
func (r *Redis) FlushAll() error {
	got, err := r.Do("FLUSHALL")
	if err != nil {
		return err
	}
	if got != "OK" {
		return fmt.Errorf("FLUSHALL: %s", got)
	}
	return nil
}

// Do sends one command (inline arguments, no spaces inside them) and returns the first line
// of the reply without its type mark; an error reply is an error.
func (r *Redis) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("redis: %s", line[1:])
	}
	if line == "" {
		return "", fmt.Errorf("redis: empty reply")
	}
	return line[1:], nil
}
