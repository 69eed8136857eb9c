package env_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/env"
)

func lookupOf(m map[string]string) env.LookupFunc {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestReader(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsWhenUnset", func(t *testing.T) {
		t.Parallel()
		r := env.New(lookupOf(nil))
		require.Equal(t, ":8080", r.Addr("A", ":8080"))
		require.Equal(t, 10*time.Second, r.Duration("D", 10*time.Second))
		require.Equal(t, 60, r.Int("I", 60, 1, 100))
		require.NoError(t, r.Err())
	})

	t.Run("EveryBadValueIsNamed", func(t *testing.T) {
		t.Parallel()
		r := env.New(lookupOf(map[string]string{
			"SVC_A": "nope", "SVC_D": "ten", "SVC_I": "0", "SVC_U": "ftp://x", "SVC_S": "short",
		}))
		r.Addr("SVC_A", ":1")
		r.Duration("SVC_D", time.Second)
		r.Int("SVC_I", 5, 1, 10)
		r.URL("SVC_U", "", "http", "https")
		r.Secret("SVC_S", 32)
		r.Required("SVC_MISSING")
		err := r.Err()
		require.Error(t, err)
		for _, name := range []string{"SVC_A", "SVC_D", "SVC_I", "SVC_U", "SVC_S", "SVC_MISSING"} {
			require.Contains(t, err.Error(), name)
		}
		require.NotContains(t, err.Error(), "short", "secrets are never echoed")
	})

	t.Run("ZeroDurationDisables", func(t *testing.T) {
		t.Parallel()
		r := env.New(lookupOf(map[string]string{"SVC_T": "0"}))
		require.Equal(t, time.Duration(0), r.Duration("SVC_T", time.Second))
		require.NoError(t, r.Err())
	})
}
