package redis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	redisadapter "svc.dev/services/webhook-ingress/internal/adapters/redis"
)

func TestIdempotencyStore(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		store *redisadapter.IdempotencyStore
		ctx   context.Context
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		c, keys := testkit.NewRedis(t)
		return &testBundle{store: redisadapter.NewIdempotencyStore(c, keys), ctx: context.Background()}
	}

	t.Run("FirstWriterWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.store.Get(b.ctx, "webhook:POST /github:d1")
		require.NoError(t, err)
		require.Empty(t, got)

		stored, err := b.store.Remember(b.ctx, []string{"webhook:POST /github:d1"}, "run_a", time.Minute)
		require.NoError(t, err)
		require.Equal(t, "run_a", stored)
		stored, err = b.store.Remember(b.ctx, []string{"webhook:POST /github:d1"}, "run_b", time.Minute)
		require.NoError(t, err)
		require.Equal(t, "run_a", stored, "SET NX keeps the first run")
		got, err = b.store.Get(b.ctx, "webhook:POST /github:d1")
		require.NoError(t, err)
		require.Equal(t, "run_a", got)
	})

	t.Run("ConcurrentWritersAgree", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var wg sync.WaitGroup
		results := make([]string, 16)
		errs := make([]error, len(results))
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = b.store.Remember(b.ctx, []string{"k"}, "run_"+string(rune('a'+i)), time.Minute)
			}()
		}
		wg.Wait()
		for i, r := range results {
			require.NoError(t, errs[i])
			require.Equal(t, results[0], r)
		}
	})

	t.Run("KeysExpire", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.Remember(b.ctx, []string{"short"}, "run_a", 50*time.Millisecond)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := b.store.Get(b.ctx, "short")
			return err == nil && got == ""
		}, 5*time.Second, 10*time.Millisecond)
	})
}
