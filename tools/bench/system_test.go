package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeDevstack stands in for tools/devstack in a throw-away module: it serves /health (after a
// moment, so the wait has to poll) and /env, and on SIGTERM takes a while to stop before it
// marks that it did, the way devstack stops its services first.
const fakeDevstack = `package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if os.Getenv("FAKE_FAIL") != "" {
		fmt.Println("building 6 services ...")
		fmt.Println("identity: build failed: undefined: frobnicate")
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	up := time.Now().Add(300 * time.Millisecond)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(up) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		_ = json.NewEncoder(w).Encode(env)
	})
	go func() { _ = http.ListenAndServe(os.Getenv("FAKE_ADDR"), mux) }()
	fmt.Println("svc is up")
	<-term
	time.Sleep(500 * time.Millisecond)
	_ = os.WriteFile(os.Getenv("FAKE_STOPPED"), []byte("stopped"), 0o644)
}
`

func TestSystem(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a fake devstack with go run")
	}

	type testBundle struct {
		spec    systemSpec
		base    string
		stopped string // the fake writes this file once it has stopped
		out     *bytes.Buffer
	}

	setup := func(t *testing.T, extraEnv ...string) *testBundle {
		t.Helper()
		root := t.TempDir()
		dir := filepath.Join(root, "tools", "devstack")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module fake\n\ngo 1.26\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(fakeDevstack), 0o644))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		stopped := filepath.Join(root, "stopped")
		out := &bytes.Buffer{}
		env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "FAKE_ADDR="+addr, "FAKE_STOPPED="+stopped,
			"SVC_IDENTITY_URL=http://127.0.0.1:8081") // as exported for a `make run`
		return &testBundle{
			spec: systemSpec{
				root: root, env: append(env, extraEnv...), healthURL: "http://" + addr + "/health",
				timeout: 2 * time.Minute, output: out,
			},
			base: "http://" + addr, stopped: stopped, out: out,
		}
	}

	t.Run("StartsWaitsAndStopsDevstackItself", func(t *testing.T) {
		t.Parallel()
		// The port was free when setup chose it, but another test's process may take it
		// before the fake binds it (startSystem checks first): choose again then.
		var (
			bundle *testBundle
			sys    *system
			err    error
		)
		for range 5 {
			bundle = setup(t)
			if sys, err = startSystem(t.Context(), bundle.spec); err == nil || !strings.Contains(err.Error(), "is taken") {
				break
			}
		}
		require.NoError(t, err)

		resp, err := http.Get(bundle.base + "/env")
		require.NoError(t, err)
		var env map[string]string
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
		resp.Body.Close()
		require.Equal(t, "127.0.0.1:18080", env["SVC_PUBLIC_ADDR"])
		require.Equal(t, "127.0.0.1:18090", env["SVC_GATEWAY_ADMIN_ADDR"])
		require.Equal(t, "127.0.0.1:18085", env["SVC_WEBHOOK_ADDR"])
		require.Equal(t, "warn", env["SVC_LOG_LEVEL"])
		require.Equal(t, "http://bench.test", env["SVC_TRUSTED_ORIGINS"], "the scenarios sign up with this Origin")
		require.Equal(t, "1000000", env["SVC_RATE_LIMIT_PER_MINUTE"], "no bucket empties during a run")
		require.Equal(t, "100000", env["SVC_GATEWAY_MAX_STREAMS"], "event-latency holds a stream per run")
		require.Empty(t, env["SVC_IDENTITY_URL"], "a make-run peer URL must not leak in")

		require.NoError(t, sys.stop(30*time.Second))
		// go run dies on SIGTERM at once; the file proves stop waited for devstack itself.
		require.FileExists(t, bundle.stopped)
		require.Contains(t, bundle.out.String(), "devstack | svc is up\n")
	})

	t.Run("FailureCarriesDevstackOutput", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, "FAKE_FAIL=1")

		_, err := startSystem(t.Context(), bundle.spec)
		require.ErrorContains(t, err, "devstack exited before the system was up")
		require.ErrorContains(t, err, "identity: build failed: undefined: frobnicate")
	})

	t.Run("RefusesATakenPort", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		bundle := setup(t)
		bundle.spec.healthURL = "http://" + ln.Addr().String() + "/health"

		_, err = startSystem(t.Context(), bundle.spec)
		require.ErrorContains(t, err, "is taken")
	})
}

func TestPrefixWriter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tail := &tailBuffer{max: 2}
	w := &prefixWriter{prefix: "d | ", w: &out, tail: tail}

	_, _ = w.Write([]byte("one\ntw"))
	_, _ = w.Write([]byte("o\nthree"))
	w.flush()

	require.Equal(t, "d | one\nd | two\nd | three\n", out.String())
	require.Equal(t, "  two\n  three\n", tail.String())
}

func TestWithEnv(t *testing.T) {
	t.Parallel()
	got := withEnv([]string{"A=1", "SVC_LOG_LEVEL=debug", "B=2"}, map[string]string{"SVC_LOG_LEVEL": "warn", "C": ""})
	require.Equal(t, []string{"A=1", "B=2", "C=", "SVC_LOG_LEVEL=warn"}, got)
}

func TestParentPID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		stat string
		want int
		ok   bool
	}{
		{"Plain", "123 (devstack) S 77 123 123 0 -1", 77, true},
		{"CommWithSpacesAndParens", "123 (a) b (c) S 78 123", 78, true},
		{"Truncated", "123 (x) S", 0, false},
		{"Garbage", "nonsense", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parentPID(tt.stat)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}
