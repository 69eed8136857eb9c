package query_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/app/query"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func changed(id string, at time.Time) port.RunStatus {
	return port.RunStatus{Run: run.Record{ID: id}, At: at}
}

// TestCatchUpWatermark: a pass's next floor is its first page's horizon, never the last change
// it read (a transaction that began before the read may commit after it with an older time);
// a full page continues after its last key within the pass; the floor never goes back.
func TestCatchUpWatermark(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	c := query.NewCatchUp(at(0))
	require.Equal(t, port.StatusKey{At: at(0)}, c.After(), "a pass starts at its floor, every run id included")

	// One short page: the pass is over; the next starts at the horizon (5 s), not at the
	// last change read (9 s), so a change that commits later at 6 s is still read.
	c, done := c.Next([]port.RunStatus{changed("run_a", at(3)), changed("run_b", at(9))}, 3, at(5))
	require.True(t, done)
	require.Equal(t, at(5), c.Floor())
	require.Equal(t, port.StatusKey{At: at(5)}, c.After())

	// Full pages: the pass goes on after the last key; its floor becomes the FIRST page's
	// horizon, whatever later pages' horizons say.
	c, done = c.Next([]port.RunStatus{changed("run_a", at(6)), changed("run_b", at(7))}, 2, at(8))
	require.False(t, done)
	require.Equal(t, port.StatusKey{At: at(7), RunID: "run_b"}, c.After())
	require.Equal(t, at(5), c.Floor(), "the floor moves only when a pass ends")
	c, done = c.Next([]port.RunStatus{changed("run_c", at(7)), changed("run_d", at(12))}, 2, at(11))
	require.False(t, done)
	require.Equal(t, port.StatusKey{At: at(12), RunID: "run_d"}, c.After())
	c, done = c.Next(nil, 2, at(13))
	require.True(t, done)
	require.Equal(t, at(8), c.Floor())

	// A horizon behind the floor (a clock stepping back) does not move it back.
	c, done = c.Next(nil, 2, at(1))
	require.True(t, done)
	require.Equal(t, at(8), c.Floor())
}

// gatedReader is an OrgStatusReader whose Status reads count and wait for the gate.
type gatedReader struct {
	port.OrgStatusReader
	reads atomic.Int32
	gate  chan struct{}
}

func (g *gatedReader) Status(_ context.Context, _, id string) (run.Record, error) {
	g.reads.Add(1)
	<-g.gate
	return run.Record{ID: id, Status: run.StatusRunning}, nil
}

// TestStreamsShareAStatusRead: the streams of an organization woken by one notification share
// one read of the run, begun after it; a stream notified after that read began reads again
// (the read it would join may predate its change). In a synctest bubble, so "every stream is
// waiting" is a fact the test waits for, not a guess.
func TestStreamsShareAStatusRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := &gatedReader{gate: make(chan struct{})}
		o := query.NewOrgStatuses(g)
		var wg sync.WaitGroup
		read := func(notified time.Time) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec, err := o.Run(context.Background(), "org_a", "run_1", notified)
				require.NoError(t, err)
				require.Equal(t, "run_1", rec.ID)
			}()
		}
		notified := time.Now()
		for range 20 {
			read(notified)
		}
		synctest.Wait() // one stream reads, nineteen wait for its read
		require.EqualValues(t, 1, g.reads.Load(), "twenty streams woken by one change read the run once")

		time.Sleep(time.Millisecond)
		read(time.Now()) // told of a later change: the read under way may predate it
		synctest.Wait()
		require.EqualValues(t, 2, g.reads.Load(), "a stream notified after the read began reads again")

		close(g.gate)
		wg.Wait()
		require.EqualValues(t, 2, g.reads.Load())
	})
}
