package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

func TestResolveRedis(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		cfg config
		sup *supervisor
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{
			cfg: config{
				stateDir:  t.TempDir(),
				redisAddr: closedAddr(t),
				lookPath:  noLookPath,
			},
			sup: newSupervisor(testLog(t), &testkit.SyncBuffer{}, 8),
		}
	}

	t.Run("UserURL", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		m := miniredis.RunT(t)
		u := "redis://" + m.Addr() + "/0"
		c, err := resolveRedis(t.Context(), bundle.cfg, map[string]string{envRedisURL: u}, bundle.sup, testLog(t))
		require.NoError(t, err)
		require.Equal(t, u, c.url)
		require.False(t, c.embedded)
		require.NoError(t, c.close(t.Context()))
	})

	t.Run("UserURLThatDoesNotAnswer", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		env := map[string]string{envRedisURL: "redis://" + closedAddr(t) + "/0"}
		_, err := resolveRedis(t.Context(), bundle.cfg, env, bundle.sup, testLog(t))
		require.ErrorContains(t, err, envRedisURL+" does not answer")
	})

	t.Run("LocalServer", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		m := miniredis.RunT(t) // stands in for the server on the standard port
		bundle.cfg.redisAddr = m.Addr()
		c, err := resolveRedis(t.Context(), bundle.cfg, map[string]string{}, bundle.sup, testLog(t))
		require.NoError(t, err)
		require.Equal(t, "redis://"+m.Addr()+"/0", c.url)
		require.Contains(t, c.source, "local server")
	})

	t.Run("EmbeddedWhenNothingElse", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		c, err := resolveRedis(t.Context(), bundle.cfg, map[string]string{}, bundle.sup, testLog(t))
		require.NoError(t, err)
		require.True(t, c.embedded)
		require.NoError(t, pingRedis(t.Context(), c.url, time.Second))
		require.NoError(t, c.close(t.Context()))
		require.Error(t, pingRedis(t.Context(), c.url, 200*time.Millisecond), "closed")
	})

	t.Run("PrivateRedisServer", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("redis-server is not installed")
		}
		bundle := setup(t)
		bundle.cfg.lookPath = exec.LookPath
		c, err := resolveRedis(t.Context(), bundle.cfg, map[string]string{}, bundle.sup, testLog(t))
		require.NoError(t, err)
		require.False(t, c.embedded)
		require.Contains(t, c.source, "private redis-server")
		require.NoError(t, pingRedis(t.Context(), c.url, time.Second))
		require.NoError(t, c.close(t.Context()))
		require.Error(t, pingRedis(t.Context(), c.url, 200*time.Millisecond), "stopped")
		require.NoError(t, bundle.sup.Err())
		require.NoFileExists(t, filepath.Join(bundle.cfg.stateDir, "redis", "dump.rdb"), "nothing persisted")
	})
}
