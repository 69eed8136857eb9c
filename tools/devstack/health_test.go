package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

func TestWaitHealthy(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		sup  *supervisor
		proc *process
	}

	// setup starts a long-lived stand-in process: waitHealthy watches it while it polls.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		sup := newSupervisor(testLog(t), &testkit.SyncBuffer{}, 4)
		p, err := sup.start(procSpec{name: "svc", path: "/bin/sh", args: []string{"-c", "sleep 30"}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.stop(context.Background()) })
		return &testBundle{sup: sup, proc: p}
	}

	t.Run("WaitsUntilHealthy", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/health", r.URL.Path)
			if calls.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte(`{"status":"ok","version":"v1.2.3"}`))
		}))
		t.Cleanup(srv.Close)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		version, err := waitHealthy(ctx, srv.Client(), srv.URL, bundle.proc, bundle.sup.Failed())
		require.NoError(t, err)
		require.Equal(t, "v1.2.3", version)
		require.EqualValues(t, 3, calls.Load())
	})

	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		port, err := freePort()
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err = waitHealthy(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(port), bundle.proc, bundle.sup.Failed())
		require.ErrorContains(t, err, "did not answer")
	})

	t.Run("ProcessExited", func(t *testing.T) {
		t.Parallel()
		sup := newSupervisor(testLog(t), &testkit.SyncBuffer{}, 4)
		p, err := sup.start(procSpec{name: "svc", path: "/bin/sh", args: []string{"-c", "exit 7"}})
		require.NoError(t, err)
		port, err := freePort()
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err = waitHealthy(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(port), p, make(chan struct{}))
		require.ErrorContains(t, err, "svc exited before it was healthy")
	})
}

func TestCheckPortFree(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.Error(t, checkPortFree(addr))
	require.NoError(t, ln.Close())
	require.NoError(t, checkPortFree(addr))
}
