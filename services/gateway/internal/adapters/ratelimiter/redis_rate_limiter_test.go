package ratelimiter_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
	"svc.dev/libs/testkit"
	"svc.dev/services/gateway/internal/adapters/ratelimiter"
)

func TestRedisRateLimiter(t *testing.T) {
	t.Parallel()

	type testBundle struct{ limiter *ratelimiter.RedisRateLimiter }
	setup := func(t *testing.T, limit ratelimit.Limit) *testBundle {
		t.Helper()
		rdb, keys := testkit.NewRedis(t)
		// A timeout far above a round trip, so that Redis and not the fallback decides.
		l := ratelimit.NewWithOptions(rdb, keys, slog.New(slog.DiscardHandler), ratelimit.Options{Timeout: 5 * time.Second})
		return &testBundle{limiter: ratelimiter.NewRedisRateLimiter(l, limit)}
	}

	t.Run("AppliesItsLimitToEveryKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(2))
		for _, key := range []string{"gw:org_1:usr_1", "gw:org_1:key_1"} {
			first := b.limiter.Allow(t.Context(), key)
			require.True(t, first.Allowed)
			require.Equal(t, 2, first.Limit)
			require.Equal(t, 1, first.Remaining)
			require.True(t, b.limiter.Allow(t.Context(), key).Allowed)
			last := b.limiter.Allow(t.Context(), key)
			require.False(t, last.Allowed)
			require.Positive(t, last.RetryAfter)
		}
	})

	t.Run("PanicsOnMissingDependency", func(t *testing.T) {
		t.Parallel()
		require.PanicsWithValue(t, "nil limiter", func() { ratelimiter.NewRedisRateLimiter(nil, ratelimit.PerMinute(1)) })
	})
}
