package runnotify

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// TestHubFirstWatcher: the hub calls OnFirst's function when its first watcher arrives (and
// again after all left and one came back, never for a second watcher), then wakes every
// watcher once the catch-up delay is over: run watchers with a wake, organization watchers
// with CatchUp. Open follows the watchers, and a stop called twice counts once.
func TestHubFirstWatcher(t *testing.T) {
	t.Parallel()
	h := NewHub()
	var firsts atomic.Int32
	h.OnFirst(50*time.Millisecond, func() { firsts.Add(1) })
	require.False(t, h.Open())

	runWake, stopRun := h.WatchRun("run_a")
	require.True(t, h.Open())
	require.Equal(t, int32(1), firsts.Load())
	orgWake, stopOrg := h.WatchOrg("org_a")
	require.Equal(t, int32(1), firsts.Load(), "a second watcher is not a first")

	select {
	case <-runWake:
	case <-time.After(10 * time.Second):
		t.Fatal("the run watcher was never woken for the catch-up")
	}
	select {
	case got := <-orgWake:
		require.Equal(t, CatchUp, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the organization watcher was never asked to catch up")
	}

	stopRun()
	stopRun()
	require.True(t, h.Open(), "one watcher is left")
	stopOrg()
	require.False(t, h.Open())
	_, stop := h.WatchRun("run_b")
	defer stop()
	require.Equal(t, int32(2), firsts.Load(), "the first watcher after none again")
}

// TestNotifierQuietWithoutRemoteWatchers: while no other replica watches, a publication wakes
// this replica's watchers and leaves nothing to send; once another does, it is queued again.
func TestNotifierQuietWithoutRemoteWatchers(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none") // never connected
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	h := NewHub()
	n := NewNotifier(pool, h, time.Millisecond, slog.New(slog.DiscardHandler))
	require.True(t, n.Notifying(), "notifies until a heartbeat says otherwise")
	require.False(t, n.Open())
	wake, stop := h.WatchRun("run_a")
	defer stop()
	require.True(t, n.Open())

	n.Remote(false)
	n.Publish([]run.Change{{RunID: "run_a", OrganizationID: "org_a"}})
	<-wake
	n.mu.Lock()
	require.Empty(t, n.pending)
	n.mu.Unlock()
	require.Empty(t, n.kick)

	n.Remote(true)
	n.Publish([]run.Change{{RunID: "run_a", OrganizationID: "org_a"}})
	<-wake
	n.mu.Lock()
	require.Contains(t, n.pending, "org_a/run_a")
	n.mu.Unlock()
	require.Len(t, n.kick, 1)
}
