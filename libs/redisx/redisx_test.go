package redisx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
)

func TestRedis(t *testing.T) {
	t.Parallel()

	t.Run("KeysStayUnderThePrefix", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "svc:rl:org_1:key_2", redisx.NewKeys("svc:").Key("rl", "org_1", "key_2"))
	})

	t.Run("CheckFollowsTheServer", func(t *testing.T) {
		t.Parallel()
		real, keys := testkit.NewRedis(t)
		require.NoError(t, real.Set(context.Background(), keys.Key("k"), "v", 0).Err())

		proxy := testkit.NewProxy(t, real.Options().Addr)
		c, err := redisx.Open("redis://"+proxy.Addr()+"/0", nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		check := redisx.Check(c)
		require.NoError(t, check(context.Background()))
		require.Equal(t, "v", c.Get(context.Background(), keys.Key("k")).Val())

		proxy.Stop()
		require.Error(t, check(context.Background()))
	})

	t.Run("RejectsAMalformedURL", func(t *testing.T) {
		t.Parallel()
		_, err := redisx.Open("http://nope", nil, nil)
		require.ErrorContains(t, err, "SVC_REDIS_URL")
	})
}
