package argon_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/adapters/argon"
	"svc.dev/services/identity/internal/app/port"
)

// slowHasher stands for argon2id: each call takes a while and the hasher records how many
// ran at once.
type slowHasher struct {
	took          time.Duration
	running, peak atomic.Int64
}

func (h *slowHasher) call() {
	n := h.running.Add(1)
	for {
		p := h.peak.Load()
		if n <= p || h.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(h.took)
	h.running.Add(-1)
}

func (h *slowHasher) Hash(context.Context, string) (string, error) { h.call(); return "h", nil }

func (h *slowHasher) Verify(context.Context, string, string) (bool, error) {
	h.call()
	return true, nil
}

func TestGate(t *testing.T) {
	t.Parallel()

	t.Run("AtMostSlotsAtOnceTheRestWaitThenAreRefused", func(t *testing.T) {
		t.Parallel()
		slow := &slowHasher{took: 50 * time.Millisecond}
		g := argon.NewGate(slow, 2, 10*time.Millisecond)
		var (
			wg   sync.WaitGroup
			ok   atomic.Int64
			busy atomic.Int64
		)
		for i := range 20 {
			wg.Go(func() {
				var err error
				if i%2 == 0 {
					_, err = g.Hash(context.Background(), "pw")
				} else {
					_, err = g.Verify(context.Background(), "pw", "h")
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, port.ErrHasherBusy):
					busy.Add(1)
				default:
					t.Errorf("unexpected error %v", err)
				}
			})
		}
		wg.Wait()
		require.LessOrEqual(t, slow.peak.Load(), int64(2))
		require.Positive(t, busy.Load(), "a burst beyond the slots is refused, not queued without end")
		require.Equal(t, int64(20), ok.Load()+busy.Load())
	})

	t.Run("AWaiterGetsAFreedSlot", func(t *testing.T) {
		t.Parallel()
		slow := &slowHasher{took: 20 * time.Millisecond}
		g := argon.NewGate(slow, 1, time.Second)
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				_, err := g.Hash(context.Background(), "pw")
				require.NoError(t, err)
			})
		}
		wg.Wait()
		require.Equal(t, int64(1), slow.peak.Load())
	})

	t.Run("AWaiterWhoseRequestEndsLeaves", func(t *testing.T) {
		t.Parallel()
		slow := &slowHasher{took: 200 * time.Millisecond}
		g := argon.NewGate(slow, 1, time.Minute)
		go func() { _, _ = g.Hash(context.Background(), "pw") }()
		require.Eventually(t, func() bool { return slow.running.Load() == 1 }, time.Second, time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := g.Verify(ctx, "pw", "h")
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("ConstructorPanicsOnMissingDependency", func(t *testing.T) {
		t.Parallel()
		require.PanicsWithValue(t, "nil hasher", func() { argon.NewGate(nil, 1, time.Second) })
		require.PanicsWithValue(t, "slots must be positive", func() { argon.NewGate(&slowHasher{}, 0, time.Second) })
	})
}
