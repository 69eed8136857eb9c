package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

// Environment variables of the fake service that this test binary turns into when devstack
// starts it (see TestMain): the tests run the real supervisor against it instead of the real
// services, which may not build yet and would need the whole system's dependencies.
const (
	fakeServiceEnv = "DEVSTACK_TEST_FAKE_SERVICE" // set: be a fake service named after argv[0]
	fakeCrashEnv   = "DEVSTACK_TEST_FAKE_CRASH"   // service name: that one exits 3 soon after start
	fakeStuckEnv   = "DEVSTACK_TEST_FAKE_STUCK"   // service name: that one ignores SIGTERM
)

// testPorts hands out the fake services' ports from below the kernel's ephemeral range
// (32768 and up here), never the same one twice in this process. Ports from the ephemeral
// range (what listening on :0 gives) are also the source ports of other tests' outbound
// connections, which now and then took a port between the pick and the fake's bind.
var testPorts = struct { //nolint:gochecknoglobals // test infrastructure
	sync.Mutex
	next int
}{next: 20000 + os.Getpid()%8000}

func testPort(t *testing.T) int {
	t.Helper()
	testPorts.Lock()
	defer testPorts.Unlock()
	for tries := 0; tries < 4000; tries++ {
		p := testPorts.next
		testPorts.next++
		if testPorts.next >= 32000 {
			testPorts.next = 20000
		}
		if checkPortFree("127.0.0.1:"+strconv.Itoa(p)) == nil {
			return p
		}
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
}

func TestMain(m *testing.M) {
	if os.Getenv(fakeServiceEnv) != "" {
		os.Exit(runFakeService())
	}
	os.Exit(m.Run())
}

// runFakeService behaves like a service as far as devstack can tell: it listens on its *_ADDR,
// answers /health, stops on SIGTERM, and shows on /env what environment it was given.
func runFakeService() int {
	name := filepath.Base(os.Args[0])
	var addrEnv string
	for _, s := range allServices() {
		if s.name == name {
			addrEnv = s.addrEnv
		}
	}
	if addrEnv == "" {
		fmt.Fprintln(os.Stderr, "fake service: unknown name", name)
		return 2
	}
	ln, err := net.Listen("tcp", os.Getenv(addrEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake service:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(healthBody{Status: "ok", Version: "fake-" + name})
	})
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(envMap(os.Environ()))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("listening on", ln.Addr())

	if os.Getenv(fakeStuckEnv) == name {
		signal.Ignore(syscall.SIGTERM)
		select {} // until devstack kills it
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if os.Getenv(fakeCrashEnv) == name {
		select {
		case <-time.After(300 * time.Millisecond):
			fmt.Println("crashing on purpose")
			return 3
		case <-ctx.Done():
		}
	}
	<-ctx.Done()
	_ = srv.Shutdown(context.Background())
	fmt.Println("stopped cleanly")
	return 0
}

func TestParseConfig(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.26.0\n"), 0o644))
	sub := filepath.Join(root, "services", "identity")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	getwd := func() (string, error) { return sub, nil }

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseConfig(nil, []string{"A=1"}, getwd)
		require.NoError(t, err)
		require.Equal(t, root, cfg.root, "found by walking up to go.work")
		require.Equal(t, filepath.Join(root, ".devstack"), cfg.stateDir)
		require.False(t, cfg.noBuild)
		require.Empty(t, cfg.only)
		require.Equal(t, []string{"A=1"}, cfg.env)
		require.Equal(t, "127.0.0.1:5432", cfg.postgresAddr)
		require.Equal(t, "127.0.0.1:6379", cfg.redisAddr)
	})

	t.Run("Flags", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseConfig([]string{"-no-build", "-only", " gateway, identity,", "-root", root, "-stop-timeout", "3s"}, nil, getwd)
		require.NoError(t, err)
		require.True(t, cfg.noBuild)
		require.Equal(t, []string{"gateway", "identity"}, cfg.only)
		require.Equal(t, 3*time.Second, cfg.stopTimeout)
	})

	t.Run("NoRepository", func(t *testing.T) {
		t.Parallel()
		_, err := parseConfig(nil, nil, func() (string, error) { return t.TempDir(), nil })
		require.ErrorContains(t, err, "no go.work")
	})

	t.Run("StrayArguments", func(t *testing.T) {
		t.Parallel()
		_, err := parseConfig([]string{"up"}, nil, getwd)
		require.ErrorContains(t, err, "unexpected arguments")
	})

	t.Run("Help", func(t *testing.T) {
		t.Parallel()
		_, err := parseConfig([]string{"-h"}, nil, getwd)
		require.ErrorIs(t, err, flag.ErrHelp)
	})
}

func TestRun(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		cfg   config
		ports map[string]int // service name → port
		out   *testkit.SyncBuffer
	}

	// setup makes a repository root whose .devstack/bin holds this test binary under every
	// service's name, and an environment that puts each service on a free port.
	// With private set it provides no Postgres or Redis, so devstack must start its own.
	setup := func(t *testing.T, private bool, extraEnv ...string) *testBundle {
		t.Helper()
		root := t.TempDir()
		binDir := filepath.Join(root, ".devstack", "bin")
		require.NoError(t, os.MkdirAll(binDir, 0o755))
		self, err := os.Executable()
		require.NoError(t, err)

		env := []string{
			"PATH=" + os.Getenv("PATH"),
			fakeServiceEnv + "=1",
			"SVC_SOMETHING_NEW=passes-through",
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318",
		}
		if !private {
			env = append(env,
				envDatabaseURL+"="+testPostgresURL(t),
				envRedisURL+"=redis://"+miniredis.RunT(t).Addr()+"/0")
		}
		ports := map[string]int{}
		for _, s := range allServices() {
			require.NoError(t, os.Symlink(self, filepath.Join(binDir, s.name)))
			port := testPort(t)
			ports[s.name] = port
			env = append(env, s.addrEnv+"=127.0.0.1:"+strconv.Itoa(port))
		}
		env = append(env, extraEnv...)

		cfg, err := parseConfig([]string{"-no-build", "-root", root, "-health-timeout", "30s", "-stop-timeout", "5s"},
			env, os.Getwd)
		require.NoError(t, err)
		if private {
			cfg.postgresAddr = closedAddr(t)
			cfg.redisAddr = closedAddr(t)
			// As root the private Postgres runs as user postgres, which must reach the data
			// directory as it would reach a repository checkout.
			require.NoError(t, os.Chmod(filepath.Dir(root), 0o755))
			require.NoError(t, os.Chmod(root, 0o755))
		}
		return &testBundle{cfg: cfg, ports: ports, out: &testkit.SyncBuffer{}}
	}

	getJSON := func(t *testing.T, url string, v any) {
		t.Helper()
		resp, err := http.Get(url) //nolint:noctx // test against a local fake
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}

	t.Run("UpAndDown", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- run(ctx, bundle.cfg, testLog(t), bundle.out) }()

		gatewayURL := "http://127.0.0.1:" + strconv.Itoa(bundle.ports["gateway"])
		require.Eventually(t, func() bool {
			return strings.Contains(bundle.out.String(), "svc is up: "+gatewayURL)
		}, 30*time.Second, 20*time.Millisecond, "output so far:\n%s", bundle.out)

		// Every service got the whole environment plus the resolved settings.
		var env map[string]string
		getJSON(t, "http://127.0.0.1:"+strconv.Itoa(bundle.ports["run-orchestrator"])+"/env", &env)
		require.Equal(t, "passes-through", env["SVC_SOMETHING_NEW"])
		require.Equal(t, "log", env["SVC_MAIL"], "identity's dev mailer logs links")
		require.Equal(t, "http://collector:4318", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
		require.Equal(t, envMap(bundle.cfg.env)[envDatabaseURL], env[envDatabaseURL])
		require.Equal(t, envMap(bundle.cfg.env)[envRedisURL], env[envRedisURL])
		require.Equal(t, "http://127.0.0.1:"+strconv.Itoa(bundle.ports["workflow-editor"]), env["SVC_EDITOR_URL"])
		require.GreaterOrEqual(t, len(env[envInternalSecret]), minSecretLen)
		var gwEnv map[string]string
		getJSON(t, gatewayURL+"/env", &gwEnv)
		require.Equal(t, env[envInternalSecret], gwEnv[envInternalSecret], "one secret for all")

		var h healthBody
		getJSON(t, gatewayURL+"/health", &h)
		require.Equal(t, "fake-gateway", h.Version)

		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "Ctrl-C is an orderly stop")
		case <-time.After(30 * time.Second):
			t.Fatal("run did not return after cancel")
		}
		out := bundle.out.String()
		require.Contains(t, out, "identity         | listening on")
		require.Equal(t, len(allServices()), strings.Count(out, "| stopped cleanly"), out)
		require.True(t, strings.HasSuffix(out, "devstack stopped: every process it started has exited\n"),
			"it says so, last: %s", out)
		_, err := http.Get(gatewayURL + "/health") //nolint:noctx // test against a local fake
		require.Error(t, err, "the gateway is gone")
	})

	// A restart on the same state folder keeps the secret it generated, so what identity
	// signed before (a browser's cookie, a saved `svc login`) stays valid.
	t.Run("RestartKeepsTheSecret", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false)
		secretOfARun := func() string {
			t.Helper()
			out := &testkit.SyncBuffer{}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- run(ctx, bundle.cfg, testLog(t), out) }()
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "svc is up: ") },
				30*time.Second, 20*time.Millisecond, "output so far:\n%s", out)
			var env map[string]string
			getJSON(t, "http://127.0.0.1:"+strconv.Itoa(bundle.ports["identity"])+"/env", &env)
			cancel()
			require.NoError(t, <-done)
			return env[envInternalSecret]
		}
		first := secretOfARun()
		file := filepath.Join(bundle.cfg.stateDir, secretFile)
		kept, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, first+"\n", string(kept))
		require.Equal(t, first, secretOfARun(), "the second run uses the kept secret")
	})

	t.Run("PrivatePostgresAndRedis", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("starts real PostgreSQL and Redis servers")
		}
		if _, err := findPostgresBinaries(exec.LookPath, "/usr/lib/postgresql/*/bin"); err != nil {
			t.Skipf("PostgreSQL is not installed: %v", err)
		}
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("redis-server is not installed")
		}
		bundle := setup(t, true)
		stop := runUntil(t, bundle.cfg, bundle.out, "svc is up: ", 60*time.Second)
		require.Contains(t, bundle.out.String(), "postgres: private server on 127.0.0.1:")
		require.Contains(t, bundle.out.String(), "redis:    private redis-server on 127.0.0.1:")

		var env map[string]string
		getJSON(t, "http://127.0.0.1:"+strconv.Itoa(bundle.ports["identity"])+"/env", &env)
		require.NoError(t, pingPostgres(t.Context(), env[envDatabaseURL], 5*time.Second))
		require.NoError(t, pingRedis(t.Context(), env[envRedisURL], time.Second))

		require.NoError(t, stop())
		require.Error(t, pingPostgres(t.Context(), env[envDatabaseURL], time.Second), "private Postgres stopped")
		require.Error(t, pingRedis(t.Context(), env[envRedisURL], 200*time.Millisecond), "private Redis stopped")
	})

	t.Run("CrashStopsEverything", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false, fakeCrashEnv+"=scheduler")
		err := run(t.Context(), bundle.cfg, testLog(t), bundle.out)
		require.ErrorContains(t, err, "scheduler exited unexpectedly: exit status 3")
		out := bundle.out.String()
		require.Contains(t, out, "scheduler        | crashing on purpose")
		// The others were stopped, not left running.
		_, herr := http.Get("http://127.0.0.1:" + strconv.Itoa(bundle.ports["identity"]) + "/health") //nolint:noctx // local fake
		require.Error(t, herr)
	})

	t.Run("AStopProblemIsSaidLast", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false, fakeStuckEnv+"=scheduler")
		bundle.cfg.only = []string{"scheduler"}
		bundle.cfg.stopTimeout = 200 * time.Millisecond
		stop := runUntil(t, bundle.cfg, bundle.out, "services are up", 30*time.Second)
		require.NoError(t, stop(), "a child killed at the deadline is no failed exit")
		out := bundle.out.String()
		require.NotContains(t, out, "every process it started has exited", out)
		require.True(t, strings.HasSuffix(out, "devstack stopped; stopping services reported a problem (see the warnings above)\n"), out)
	})

	t.Run("Only", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false)
		bundle.cfg.only = []string{"identity"}
		stop := runUntil(t, bundle.cfg, bundle.out, "services are up (no gateway started): identity", 30*time.Second)
		require.NoError(t, stop())
		require.NotContains(t, bundle.out.String(), "gateway is healthy")
	})

	t.Run("PortInUse", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(bundle.ports["scheduler"]))
		require.NoError(t, err)
		defer ln.Close()
		err = run(t.Context(), bundle.cfg, testLog(t), bundle.out)
		require.ErrorContains(t, err, "SVC_SCHEDULER_ADDR")
	})

	t.Run("PublicAddrWithoutPort", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false, "SVC_PUBLIC_ADDR=127.0.0.1:0")
		err := run(t.Context(), bundle.cfg, testLog(t), bundle.out)
		require.ErrorContains(t, err, "SVC_PUBLIC_ADDR")
		require.Empty(t, bundle.out.String(), "nothing was started")
	})

	t.Run("MissingBinary", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false)
		require.NoError(t, os.Remove(filepath.Join(bundle.cfg.stateDir, "bin", "identity")))
		err := run(t.Context(), bundle.cfg, testLog(t), bundle.out)
		require.ErrorContains(t, err, "no binary for identity")
	})

	t.Run("InterruptedDuringStartup", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, false)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, run(ctx, bundle.cfg, testLog(t), bundle.out))
	})
}

// runUntil starts run with cfg, writing to out, and waits, up to within, until out holds want.
// stop cancels it (a Ctrl-C) and returns run's error.
func runUntil(t *testing.T, cfg config, out *testkit.SyncBuffer, want string, within time.Duration) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, testLog(t), out) }()
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), want)
	}, within, 20*time.Millisecond, "output so far:\n%s", out)
	return func() error {
		cancel()
		return <-done
	}
}
