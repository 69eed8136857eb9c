package service_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/gateway/internal/service"
)

func TestLoadConfigRateLimit(t *testing.T) {
	t.Parallel()
	lookup := func(rate string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			switch name {
			case "SVC_INTERNAL_SECRET":
				return strings.Repeat("s", 32), true
			case "SVC_RATE_LIMIT_PER_MINUTE":
				return rate, rate != ""
			}
			return "", false
		}
	}

	t.Run("Default", func(t *testing.T) {
		t.Parallel()
		cfg, err := service.LoadConfig(lookup(""))
		require.NoError(t, err)
		require.Equal(t, 60, cfg.RateLimitPerMinute)
	})

	for _, tc := range []struct {
		value string
		want  int
	}{{"1", 1}, {"600", 600}, {"1000000", 1_000_000}} {
		t.Run("Accepts"+tc.value, func(t *testing.T) {
			t.Parallel()
			cfg, err := service.LoadConfig(lookup(tc.value))
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.RateLimitPerMinute)
		})
	}

	for _, value := range []string{"0", "-5", "1000001", "sixty", "1.5", "1e3"} {
		t.Run("Rejects"+value, func(t *testing.T) {
			t.Parallel()
			_, err := service.LoadConfig(lookup(value))
			require.ErrorContains(t, err, "SVC_RATE_LIMIT_PER_MINUTE")
		})
	}
}
