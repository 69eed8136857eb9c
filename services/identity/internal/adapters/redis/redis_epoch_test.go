package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/services/identity/internal/adapters/redis"
)

// A lost counter restarts from the current time, never from a value it held before.
func TestRedisEpochNeverRepeats(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	e := redis.NewRedisEpoch(rdb, keys)
	ctx := context.Background()
	key := keys.Key(redis.KeyName)

	before := time.Now().UnixMicro()
	require.NoError(t, e.Bump(ctx))
	first, err := rdb.Get(ctx, key).Int64()
	require.NoError(t, err)
	require.Greater(t, first, before, "a missing counter starts from the current time")

	require.NoError(t, e.Bump(ctx))
	second, err := rdb.Get(ctx, key).Int64()
	require.NoError(t, err)
	require.Equal(t, first+1, second)

	require.NoError(t, rdb.Del(ctx, key).Err()) // Redis lost it
	require.NoError(t, e.Bump(ctx))
	third, err := rdb.Get(ctx, key).Int64()
	require.NoError(t, err)
	require.Greater(t, third, second, "after a loss the epoch still moves forward")
}
