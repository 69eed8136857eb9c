package redisx_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
)

// A counter moves by one per bump; a lost one restarts from the current time, never from a
// value it held before; a read starts a missing counter and keeps it.
func TestEpochs(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	e := redisx.NewEpochs(rdb)
	ctx := t.Context()
	key, other, bad := keys.Key("epoch", "a"), keys.Key("epoch", "b"), keys.Key("epoch", "bad")

	before := time.Now().UnixMicro()
	first, err := e.Bump(ctx, key)
	require.NoError(t, err)
	require.Greater(t, first, before, "a missing counter starts from the current time")
	second, err := e.Bump(ctx, key)
	require.NoError(t, err)
	require.Equal(t, first+1, second)
	require.NoError(t, rdb.Del(ctx, key).Err()) // Redis lost it
	third, err := e.Bump(ctx, key)
	require.NoError(t, err)
	require.Greater(t, third, second, "after a loss the counter still moves forward")

	require.NoError(t, rdb.Set(ctx, bad, "x", 0).Err())
	got, err := e.Read(ctx, []string{key, other, bad})
	require.NoError(t, err)
	require.Equal(t, third, got[0])
	require.Greater(t, got[1], third, "a read starts a missing counter from the current time")
	require.Zero(t, got[2], "not a counter: unknown")
	again, err := e.Read(ctx, []string{other})
	require.NoError(t, err)
	require.Equal(t, got[1], again[0], "the started counter is kept")
	moved, err := e.Bump(ctx, other)
	require.NoError(t, err)
	require.Equal(t, got[1]+1, moved)
}
