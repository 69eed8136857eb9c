package redis_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
	"svc.dev/services/run-orchestrator/internal/adapters/redis"
)

// Counters are read in one call; a missing one is seeded from the current time (never 0, never
// a value it held before); a value that is not a counter reads as unknown (0).
func TestEpochs(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	e := redis.NewRedisEpochs(rdb, keys)
	ctx := t.Context()
	require.NoError(t, rdb.Set(ctx, redis.Key(keys, "org_a"), 41, 0).Err())
	require.NoError(t, rdb.Set(ctx, redis.Key(keys, "org_bad"), "x", 0).Err())

	before := time.Now().UnixMicro()
	got, err := e.Epochs(ctx, []string{"org_a", "org_new", "org_bad"})
	require.NoError(t, err)
	require.Equal(t, int64(41), got[0])
	require.Greater(t, got[1], before, "a missing counter is seeded from the current time")
	require.Zero(t, got[2])

	again, err := e.Epochs(ctx, []string{"org_new"})
	require.NoError(t, err)
	require.Equal(t, got[1], again[0], "the seed is kept: the next read sees the same epoch")

	// The editor's increment moves it on.
	require.NoError(t, rdb.Incr(ctx, redis.Key(keys, "org_new")).Err())
	moved, err := e.Epochs(ctx, []string{"org_new"})
	require.NoError(t, err)
	require.Equal(t, got[1]+1, moved[0])
}

// An unreachable Redis is an error, quickly: the batch then reads the editor.
func TestEpochsWithoutRedis(t *testing.T) {
	t.Parallel()
	rdb, err := redisx.Open("redis://127.0.0.1:1/0", nil, nil) // nothing listens on port 1
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	e := redis.NewRedisEpochs(rdb, redisx.NewKeys("t:"))
	_, err = e.Epochs(t.Context(), []string{"org_a"})
	require.Error(t, err)
}
