package ratelimiter_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/services/gateway/internal/adapters/ratelimiter"
)

// TestRedisStreamSlots: two gateways sharing Redis share each principal's cap; a stream's
// slot is given back when it ends; a slot whose gateway died (its lease no longer renewed)
// stops counting when the lease ends; a slot that is held outlives several leases.
func TestRedisStreamSlots(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	const lease = 300 * time.Millisecond
	a := ratelimiter.NewRedisStreamSlots(rdb, keys, lease)
	b := ratelimiter.NewRedisStreamSlots(rdb, keys, lease)
	take := func(s *ratelimiter.RedisStreamSlots, key string) (bool, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		ok, err := s.Take(ctx, key, 3)
		require.NoError(t, err)
		if !ok {
			cancel()
		}
		return ok, cancel
	}

	ok1, end1 := take(a, "gw:org_1:usr_1")
	ok2, end2 := take(a, "gw:org_1:usr_1")
	ok3, end3 := take(b, "gw:org_1:usr_1")
	require.True(t, ok1 && ok2 && ok3)
	defer end2()
	defer end3()
	full, _ := take(b, "gw:org_1:usr_1")
	require.False(t, full, "the cap holds across gateways")
	full, _ = take(a, "gw:org_1:usr_1")
	require.False(t, full)
	other, endOther := take(a, "gw:org_1:usr_2")
	require.True(t, other, "another principal has slots of its own")
	endOther()

	// Held streams outlive their lease: they are renewed.
	deadline := time.Now().Add(3 * lease)
	for time.Now().Before(deadline) {
		full, _ = take(b, "gw:org_1:usr_1")
		require.False(t, full, "a held slot must not expire while its stream is open")
		time.Sleep(lease / 4)
	}

	// eventuallyTakes waits until s can take a slot of key (and gives it back).
	eventuallyTakes := func(s *ratelimiter.RedisStreamSlots, key, why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			ok, end := take(s, key)
			if ok {
				end()
			}
			return ok
		}, 5*time.Second, 10*time.Millisecond, why)
	}
	end1()
	eventuallyTakes(b, "gw:org_1:usr_1", "a stream that ends gives its slot back")

	// A gateway that died: its member is neither renewed nor removed, and stops counting when
	// its lease ends (Redis's clock).
	set := keys.Key(ratelimiter.StreamSlotsKey + "gw:org_1:usr_3")
	now, err := rdb.Time(t.Context()).Result()
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, rdb.ZAdd(t.Context(), set, redis.Z{Score: float64(now.Add(lease).UnixMilli()), Member: "dead-" + strconv.Itoa(i)}).Err())
	}
	full, _ = take(a, "gw:org_1:usr_3")
	require.False(t, full, "the dead gateway's slots count until their lease ends")
	eventuallyTakes(a, "gw:org_1:usr_3", "a dead gateway's slots end with their lease")
}

// TestRedisStreamSlotsWithoutRedis: slots that cannot be counted are an error, not a refusal.
func TestRedisStreamSlotsWithoutRedis(t *testing.T) {
	t.Parallel()
	_, keys := testkit.NewRedis(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	ok, err := ratelimiter.NewRedisStreamSlots(dead, keys, time.Second).Take(t.Context(), "gw:org_1:usr_1", 3)
	require.Error(t, err)
	require.False(t, ok)
}
