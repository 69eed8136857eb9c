package redis_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/testkit"
	"svc.dev/services/gateway/internal/adapters/redis"
)

func TestRedisRateLimiter(t *testing.T) {
	t.Parallel()

	type testBundle struct{ limiter *redis.RedisRateLimiter }
	setup := func(t *testing.T, limit, org ratelimit.Limit) *testBundle {
		t.Helper()
		rdb, keys := testkit.NewRedis(t)
		// A timeout far above a round trip, so that Redis and not the fallback decides.
		l := ratelimit.NewWithOptions(rdb, keys, slog.New(slog.DiscardHandler), ratelimit.Options{Timeout: 5 * time.Second})
		return &testBundle{limiter: redis.NewRedisRateLimiter(l, limit, org)}
	}

	t.Run("AppliesItsLimitToEveryKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(2), ratelimit.PerMinute(100))
		for _, id := range []internalauth.Identity{
			{OrganizationID: "org_1", UserID: "usr_1", AuthMode: internalauth.ModeSession},
			{OrganizationID: "org_1", UserID: "usr_1", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1"},
		} {
			first := b.limiter.Allow(t.Context(), id)
			require.True(t, first.Allowed)
			require.Equal(t, 2, first.Limit)
			require.Equal(t, 1, first.Remaining)
			require.True(t, b.limiter.Allow(t.Context(), id).Allowed)
			last := b.limiter.Allow(t.Context(), id)
			require.False(t, last.Allowed)
			require.Positive(t, last.RetryAfter)
		}
	})

	t.Run("TheOrganizationsBucketCapsEveryPrincipal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(2), ratelimit.PerMinute(3))
		allowed := 0
		for i := range 5 {
			id := internalauth.Identity{OrganizationID: "org_1", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_" + strconv.Itoa(i)}
			for range 2 {
				if b.limiter.Allow(t.Context(), id).Allowed {
					allowed++
				}
			}
		}
		require.Equal(t, 3, allowed, "five keys share the organization's 3")
		require.True(t, b.limiter.Allow(t.Context(), internalauth.Identity{OrganizationID: "org_2", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_9"}).Allowed)
	})

	t.Run("PanicsOnMissingDependency", func(t *testing.T) {
		t.Parallel()
		require.PanicsWithValue(t, "nil limiter", func() { redis.NewRedisRateLimiter(nil, ratelimit.PerMinute(1), ratelimit.PerMinute(1)) })
	})
}
