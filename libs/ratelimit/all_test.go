package ratelimit_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
	"svc.dev/libs/testkit"
)

// TestAllowAll: several buckets decided at once, all or none, in Redis and in process.
func TestAllowAll(t *testing.T) {
	t.Parallel()

	principal := func(key string) ratelimit.Bucket { return ratelimit.Bucket{Key: key, Limit: ratelimit.PerMinute(3)} }
	org := ratelimit.Bucket{Key: "gw:org:org_1", Limit: ratelimit.PerMinute(5)}

	check := func(t *testing.T, allowAll func(...ratelimit.Bucket) ratelimit.Result, allow func(ratelimit.Bucket) ratelimit.Result) {
		t.Helper()
		// One principal: its own bucket (3) is the tighter and is reported.
		for i := range 3 {
			r := allowAll(principal("gw:org_1:key_a"), org)
			require.True(t, r.Allowed, i)
			require.Equal(t, 3, r.Limit)
			require.Equal(t, 2-i, r.Remaining)
		}
		r := allowAll(principal("gw:org_1:key_a"), org)
		require.False(t, r.Allowed)
		require.Equal(t, 3, r.Limit)
		require.Positive(t, r.RetryAfter)

		// Another key of the organization: its own bucket is full, but the organization has
		// 2 of 5 left (the refusal above took none), and then it is the tighter.
		r = allowAll(principal("gw:org_1:key_b"), org)
		require.True(t, r.Allowed)
		require.Equal(t, 5, r.Limit)
		require.Equal(t, 1, r.Remaining)
		require.True(t, allowAll(principal("gw:org_1:key_c"), org).Allowed)
		r = allowAll(principal("gw:org_1:key_d"), org)
		require.False(t, r.Allowed, "a new key does not multiply the organization's share")
		require.Equal(t, 5, r.Limit)
		require.Positive(t, r.RetryAfter)
		// The refusal took nothing from key_d's own bucket.
		r = allow(principal("gw:org_1:key_d"))
		require.True(t, r.Allowed)
		require.Equal(t, 2, r.Remaining)
		// Another organization is untouched.
		require.True(t, allowAll(principal("gw:org_2:key_a"), ratelimit.Bucket{Key: "gw:org:org_2", Limit: ratelimit.PerMinute(5)}).Allowed)
	}

	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		rdb, keys := testkit.NewRedis(t)
		l := ratelimit.NewWithOptions(rdb, keys, slog.New(slog.DiscardHandler), ratelimit.Options{Timeout: 5 * time.Second})
		check(t,
			func(b ...ratelimit.Bucket) ratelimit.Result { return l.AllowAll(t.Context(), b...) },
			func(b ratelimit.Bucket) ratelimit.Result { return l.Allow(t.Context(), b.Key, b.Limit) })
		require.Zero(t, l.Fallbacks(), "Redis decided")
		// The buckets are the ones Allow keeps: same keys, same state.
		n, err := rdb.Exists(t.Context(), keys.Key("rate:gw:org:org_1"), keys.Key("rate:gw:org_1:key_a")).Result()
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
	})

	t.Run("InProcess", func(t *testing.T) {
		t.Parallel()
		local := ratelimit.NewLocal(time.Now, 100)
		check(t, local.AllowAll, func(b ratelimit.Bucket) ratelimit.Result { return local.Allow(b.Key, b.Limit) })
	})
}
