// Package harness starts the real system for black-box tests: every service built from this
// checkout and run as its own process on random ports, against a fresh database of the test
// Postgres and a fresh key prefix of the test Redis. Tests speak HTTP to the gateway only
// (and, where a test is about a service's own guard, straight to that service).
package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc.dev/libs/testkit"
)

// The services, backends first: the gateway starts last.
var services = []Service{Identity, Editor, Orchestrator, Scheduler, Webhook, Gateway} //nolint:gochecknoglobals // fixed list

// Service names a service binary.
type Service string

// The services of the system.
const (
	Gateway      Service = "gateway"
	Identity     Service = "identity"
	Editor       Service = "workflow-editor"
	Orchestrator Service = "run-orchestrator"
	Scheduler    Service = "scheduler"
	Webhook      Service = "webhook-ingress"
)

// addrVar and urlVar are the settings that place a service and tell peers where it is.
func (s Service) addrVar() string { return "SVC_" + s.key() + "_ADDR" }
func (s Service) urlVar() string  { return "SVC_" + s.key() + "_URL" }

func (s Service) key() string {
	switch s {
	case Gateway:
		return "PUBLIC"
	case Editor:
		return "EDITOR"
	case Orchestrator:
		return "ORCHESTRATOR"
	case Webhook:
		return "WEBHOOK"
	default:
		return strings.ToUpper(string(s))
	}
}

// build holds the binaries, built once per test process.
type build struct {
	once sync.Once
	dir  string
	err  error
}

var binaries build //nolint:gochecknoglobals // test infrastructure: one build per test binary

// Binary returns the path of a service binary built from this checkout.
func Binary(tb testing.TB, s Service) string {
	tb.Helper()
	binaries.once.Do(func() {
		binaries.dir, binaries.err = buildAll()
	})
	if binaries.err != nil {
		tb.Fatalf("harness: build: %v", binaries.err)
	}
	return filepath.Join(binaries.dir, string(s))
}

// Cleanup removes the built binaries; TestMain calls it after the tests.
func Cleanup() {
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
}

func buildAll() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "svc-e2e-bin-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir + "/"}
	for _, s := range services {
		args = append(args, fmt.Sprintf("svc.dev/services/%s/cmd/%s", s, s))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	w := strings.TrimSpace(string(out))
	if w == "" || w == "off" {
		return "", fmt.Errorf("e2e tests run in the workspace (go.work not found)")
	}
	return filepath.Dir(w), nil
}

// Options adjust one system.
type Options struct {
	// Env is added to every service's environment.
	Env map[string]string
	// ServiceEnv is added to one service's environment, after Env.
	ServiceEnv map[Service]map[string]string
	// TrustGateway makes identity trust the gateway's own origin, as clients that send their
	// API address as Origin (the svc CLI) need: SVC_PUBLIC_URL becomes BaseURL, and its
	// localhost form is added to SVC_TRUSTED_ORIGINS so the system answers at two API URLs.
	TrustGateway bool
	// DatabaseURL, when set, is the database the system uses as it is (a private server's, see
	// StartPostgres); by default the system gets a fresh database of the test Postgres.
	DatabaseURL string
	// RedisURL, when set, is the Redis the system uses (see StartRedis); by default the test
	// Redis, under a fresh key prefix either way.
	RedisURL string
	// Pprof gives every process its own profiler listener (SVC_PPROF_ADDR); see
	// Process.PprofURL.
	Pprof bool
	// Secret, when set, is the internal signing secret (SVC_INTERNAL_SECRET) instead of a
	// fresh one: a system restored from another's backup keeps its predecessor's.
	Secret string
}

// System is a running system.
type System struct {
	// BaseURL is the gateway's public address; AdminURL its probe address.
	BaseURL  string
	AdminURL string
	// URLs are the services' own addresses.
	URLs map[Service]string
	// Secret is the internal signing secret the services share.
	Secret string
	// DatabaseURL is the system's own database.
	DatabaseURL string
	// RedisPrefix is the system's own Redis key prefix.
	RedisPrefix string
	env         map[string]string
	opts        Options
	mu          sync.Mutex
	procs       map[Service][]*Process
}

// Start runs every service for this test and stops them when it ends.
func Start(t *testing.T, opts Options) *System {
	t.Helper()
	s := New(t, opts)
	s.StartAll(t)
	return s
}

// New prepares a system (addresses, database, settings) without starting a process: a test
// that places proxies between services (ProxyPeer, ProxyDatabase) does so before StartAll.
func New(t *testing.T, opts Options) *System {
	t.Helper()
	s := &System{
		URLs:        map[Service]string{},
		procs:       map[Service][]*Process{},
		Secret:      opts.Secret,
		DatabaseURL: opts.DatabaseURL,
		RedisPrefix: testkit.Name("e2e") + ":",
		opts:        opts,
	}
	if s.Secret == "" {
		s.Secret = randomHex(32)
	}
	if s.DatabaseURL == "" {
		s.DatabaseURL = testkit.NewDatabase(t)
	}
	redisURL := opts.RedisURL
	if redisURL == "" {
		redisURL = testkit.RedisURL(t)
	}
	s.opts.ServiceEnv = map[Service]map[string]string{}
	for svc, env := range opts.ServiceEnv {
		s.opts.ServiceEnv[svc] = maps.Clone(env)
	}
	s.env = map[string]string{
		"SVC_DATABASE_URL":    s.DatabaseURL,
		"SVC_REDIS_URL":       redisURL,
		"SVC_REDIS_PREFIX":    s.RedisPrefix,
		"SVC_INTERNAL_SECRET": s.Secret,
		"SVC_LOG_LEVEL":       "debug",
		// Tests run side by side against one Postgres (max_connections 100 here): each process
		// gets a small pool instead of its production size (the orchestrator asks for 32).
		"SVC_DATABASE_MAX_CONNS": "8",
	}
	for _, svc := range services {
		addr := freeAddr(t)
		s.env[svc.addrVar()] = addr
		s.URLs[svc] = "http://" + addr
		if svc != Gateway {
			s.env[svc.urlVar()] = "http://" + addr
		}
	}
	admin := freeAddr(t)
	s.env["SVC_GATEWAY_ADMIN_ADDR"] = admin
	s.AdminURL = "http://" + admin
	s.BaseURL = s.URLs[Gateway]
	if opts.TrustGateway {
		s.env["SVC_PUBLIC_URL"] = s.BaseURL
		s.env["SVC_TRUSTED_ORIGINS"] = strings.Replace(s.BaseURL, "127.0.0.1", "localhost", 1)
		if extra := opts.Env["SVC_TRUSTED_ORIGINS"]; extra != "" {
			s.env["SVC_TRUSTED_ORIGINS"] += "," + extra
		}
	}
	for k, v := range opts.Env {
		if k == "SVC_TRUSTED_ORIGINS" && opts.TrustGateway {
			continue
		}
		s.env[k] = v
	}
	return s
}

// StartAll starts one process of every service, backends first.
func (s *System) StartAll(t *testing.T) {
	t.Helper()
	for _, svc := range services {
		s.Run(t, svc, nil)
	}
}

// StopAll stops every live process (SIGTERM, as Process.Stop), the gateway first and the
// backends in the reverse of their start order, so that no request reaches a stopped peer.
func (s *System) StopAll(t *testing.T) {
	t.Helper()
	for _, svc := range slices.Backward(services) {
		for _, p := range s.Live(svc) {
			p.Stop(t)
		}
	}
}

// SetServiceEnv sets one setting of every later process of svc (after Options.ServiceEnv).
func (s *System) SetServiceEnv(svc Service, key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.ServiceEnv[svc] == nil {
		s.opts.ServiceEnv[svc] = map[string]string{}
	}
	s.opts.ServiceEnv[svc][key] = value
}

// ProxyPeer places a TCP proxy between from and its peer to: every later process of from
// reaches to through the proxy, whose Stop cuts them apart. Call it before StartAll.
func (s *System) ProxyPeer(t *testing.T, from, to Service) *testkit.Proxy {
	t.Helper()
	if to == Gateway {
		t.Fatalf("harness: the gateway is nobody's peer")
	}
	p := testkit.NewProxy(t, strings.TrimPrefix(s.URLs[to], "http://"))
	s.SetServiceEnv(from, to.urlVar(), "http://"+p.Addr())
	return p
}

// ProxyDatabase places a TCP proxy between every later process of svc and Postgres.
func (s *System) ProxyDatabase(t *testing.T, svc Service) *testkit.Proxy {
	t.Helper()
	u, err := url.Parse(s.DatabaseURL)
	if err != nil {
		t.Fatalf("harness: database url: %v", err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := testkit.NewProxy(t, host)
	u.Host = p.Addr()
	s.SetServiceEnv(svc, "SVC_DATABASE_URL", u.String())
	return p
}

// Run starts one more process of svc (on its configured address unless extra moves it),
// waits until it answers /health, and stops it when the test ends.
func (s *System) Run(t *testing.T, svc Service, extra map[string]string) *Process {
	t.Helper()
	env := os.Environ()
	for k, v := range s.env {
		env = append(env, k+"="+v)
	}
	s.mu.Lock()
	for k, v := range s.opts.ServiceEnv[svc] {
		env = append(env, k+"="+v)
	}
	s.mu.Unlock()
	if _, ok := extra["SVC_PPROF_ADDR"]; s.opts.Pprof && !ok {
		env = append(env, "SVC_PPROF_ADDR="+freeAddr(t))
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	base := s.URLs[svc]
	if svc == Gateway {
		base = s.AdminURL
	}
	if a, ok := extra[svc.addrVar()]; ok {
		base = "http://" + a
	}
	return s.start(t, svc, env, base)
}

// Restart starts p's service again with p's settings, on p's address, once p has exited (a
// test kills or stops it first), waits until it answers /health, and returns the new process.
func (s *System) Restart(t *testing.T, p *Process) *Process {
	t.Helper()
	if done, _ := p.Exited(); !done {
		t.Fatalf("harness: restart of %s (pid %d) while it still runs", p.Name, p.Pid())
	}
	return s.start(t, p.Name, p.env, p.health)
}

func (s *System) start(t *testing.T, svc Service, env []string, health string) *Process {
	t.Helper()
	p := StartProcess(t, svc, env)
	p.health = health
	p.WaitHealthy(t, health, 30*time.Second)
	s.mu.Lock()
	s.procs[svc] = append(s.procs[svc], p)
	s.mu.Unlock()
	return p
}

// Live returns the processes of svc that have not exited, in start order.
func (s *System) Live(svc Service) []*Process {
	var out []*Process
	for _, p := range s.Processes(svc) {
		if done, _ := p.Exited(); !done {
			out = append(out, p)
		}
	}
	return out
}

// Output is everything the processes of svc printed so far (their JSON log lines).
func (s *System) Output(svc Service) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, p := range s.procs[svc] {
		b.WriteString(p.Output())
	}
	return b.String()
}

// Processes returns the running and stopped processes of svc, in start order (a test that
// restarts a service with other settings stops the first one).
func (s *System) Processes(svc Service) []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Process(nil), s.procs[svc]...)
}

// Env returns the environment the system gives its services.
func (s *System) Env() map[string]string {
	out := make(map[string]string, len(s.env))
	for k, v := range s.env {
		out[k] = v
	}
	return out
}

// Process is one running service binary.
type Process struct {
	Name   Service
	cmd    *exec.Cmd
	env    []string
	health string // the base URL whose /health says the process is up
	out    *testkit.SyncBuffer
	done   chan struct{}
	err    error
}

// StartProcess runs svc's binary with env; output is kept and shown if the test fails.
func StartProcess(t *testing.T, svc Service, env []string) *Process {
	t.Helper()
	p := &Process{Name: svc, env: env, out: &testkit.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(Binary(t, svc))
	p.cmd.Env = env
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("harness: start %s: %v", svc, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("--- %s output ---\n%s", svc, p.out.String())
		}
	})
	return p
}

// WaitHealthy polls base/health until it answers 200 or the process dies or time runs out.
func (p *Process) WaitHealthy(t *testing.T, base string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("harness: %s exited before it was healthy: %v\n%s", p.Name, p.err, p.out.String())
		default:
		}
		resp, err := client.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("harness: %s not healthy at %s within %s\n%s", p.Name, base, within, p.out.String())
}

// Stop sends SIGTERM and waits for a clean exit, killing the process after 10 s.
func (p *Process) Stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("harness: %s did not stop within 10 s of SIGTERM", p.Name)
	}
}

// Kill sends SIGKILL (a crash: no shutdown code runs) and waits until the process is gone.
func (p *Process) Kill(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("harness: kill %s: %v", p.Name, err)
	}
	<-p.done
}

// Pid is the process id (services record it, e.g. run-orchestrator's replicas table).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Setting returns the value of one of the process's environment variables (the last wins).
func (p *Process) Setting(key string) string {
	v := ""
	for _, kv := range p.env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// PprofURL is the base URL of the process's profiler (Options.Pprof), or "".
func (p *Process) PprofURL() string {
	if a := p.Setting("SVC_PPROF_ADDR"); a != "" {
		return "http://" + a
	}
	return ""
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return FreeAddr(t)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Context returns a context bounded by the test's deadline or a minute.
func Context(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
