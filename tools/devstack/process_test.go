package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

func testLog(t *testing.T) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func TestLineWriter(t *testing.T) {
	t.Parallel()

	t.Run("PrefixesWholeLines", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		w := newLineWriter("svc | ", &out)
		for _, chunk := range []string{"hel", "lo\nwor", "ld\r\n", "\n", "tail"} {
			n, err := w.Write([]byte(chunk))
			require.NoError(t, err)
			require.Equal(t, len(chunk), n)
		}
		require.Equal(t, "svc | hello\nsvc | world\nsvc | \n", out.String(), "the unterminated tail waits")
		w.Flush()
		require.Equal(t, "svc | hello\nsvc | world\nsvc | \nsvc | tail\n", out.String())
	})

	t.Run("LongLineIsCut", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		w := newLineWriter("> ", &out)
		_, err := w.Write(bytes.Repeat([]byte("x"), maxLine+10))
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(out.String(), "\n"))
		require.Empty(t, w.buf)
	})
}

func TestSupervisor(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		sup *supervisor
		out *testkit.SyncBuffer
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		out := &testkit.SyncBuffer{}
		return &testBundle{sup: newSupervisor(testLog(t), out, 6), out: out}
	}

	sh := func(name, script string) procSpec {
		return procSpec{name: name, path: "/bin/sh", args: []string{"-c", script}}
	}

	waitFor := func(t *testing.T, out *testkit.SyncBuffer, s string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(out.String(), s) },
			10*time.Second, 10*time.Millisecond, "waiting for %q in:\n%s", s, out)
	}

	t.Run("PrefixesOutputAndStopsOnSIGTERM", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		p, err := bundle.sup.start(sh("svc", "echo ready; echo oops >&2; sleep 30"))
		require.NoError(t, err)
		waitFor(t, bundle.out, "oops")
		require.Equal(t, "svc    | ready\nsvc    | oops\n", bundle.out.String())

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.stop(ctx))
		require.NoError(t, bundle.sup.Err(), "a requested stop is no failure")
		select {
		case <-bundle.sup.Failed():
			t.Fatal("supervisor reported a failure")
		default:
		}
	})

	t.Run("KillsWhatIgnoresSIGTERM", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		p, err := bundle.sup.start(sh("stubborn", `trap "" TERM; echo ready; while :; do sleep 0.1; done`))
		require.NoError(t, err)
		waitFor(t, bundle.out, "ready")

		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		require.ErrorContains(t, p.stop(ctx), "killed")
		require.Less(t, time.Since(start), 5*time.Second)
		<-p.Done()
		require.NoError(t, bundle.sup.Err())
	})

	t.Run("ReportsUnexpectedExit", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		p, err := bundle.sup.start(sh("crash", "echo bye; exit 3"))
		require.NoError(t, err)
		select {
		case <-bundle.sup.Failed():
		case <-time.After(10 * time.Second):
			t.Fatal("no failure reported")
		}
		require.ErrorContains(t, bundle.sup.Err(), "crash exited unexpectedly: exit status 3")
		<-p.Done()
		require.Contains(t, bundle.out.String(), "crash  | bye\n")

		// Stopping what already exited is fine and quick.
		require.NoError(t, p.stop(t.Context()))
	})

	t.Run("CleanExitIsStillUnexpected", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		_, err := bundle.sup.start(sh("quiet", "exit 0"))
		require.NoError(t, err)
		<-bundle.sup.Failed()
		require.ErrorContains(t, bundle.sup.Err(), "quiet exited unexpectedly")
	})

	t.Run("StopAll", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		var procs []*process
		for _, name := range []string{"a", "b", "c"} {
			p, err := bundle.sup.start(sh(name, "sleep 30"))
			require.NoError(t, err)
			procs = append(procs, p)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		require.NoError(t, stopAll(ctx, procs))
		for _, p := range procs {
			<-p.Done()
		}
		require.NoError(t, bundle.sup.Err())
	})

	t.Run("MissingBinary", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		_, err := bundle.sup.start(procSpec{name: "ghost", path: "/nonexistent/ghost"})
		require.ErrorContains(t, err, "start ghost")
	})
}
