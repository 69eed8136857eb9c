package service_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
	"svc.dev/services/gateway/internal/app"
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

// TestLoadConfigOrigins: the gateway trusts the origins identity trusts, from the same
// settings with the same defaults.
func TestLoadConfigOrigins(t *testing.T) {
	t.Parallel()
	lookup := func(vars map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if name == "SVC_INTERNAL_SECRET" {
				return strings.Repeat("s", 32), true
			}
			v, ok := vars[name]
			return v, ok
		}
	}
	cfg, err := service.LoadConfig(lookup(nil))
	require.NoError(t, err)
	require.Equal(t, web.Origins{"http://localhost:8080": true}, cfg.Origins)

	cfg, err = service.LoadConfig(lookup(map[string]string{
		"SVC_PUBLIC_URL": "https://flow.example.com/app", "SVC_TRUSTED_ORIGINS": "https://admin.example.com:443, http://127.0.0.1:3000",
	}))
	require.NoError(t, err)
	require.Equal(t, web.Origins{"https://flow.example.com": true, "https://admin.example.com": true, "http://127.0.0.1:3000": true}, cfg.Origins)

	_, err = service.LoadConfig(lookup(map[string]string{"SVC_TRUSTED_ORIGINS": "admin.example.com"}))
	require.ErrorContains(t, err, "SVC_TRUSTED_ORIGINS")
}

// TestLoadConfigOrgRateLimit: the organization's bucket defaults to ten principals' worth of
// the configured per-principal limit.
func TestLoadConfigOrgRateLimit(t *testing.T) {
	t.Parallel()
	lookup := func(vars map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if name == "SVC_INTERNAL_SECRET" {
				return strings.Repeat("s", 32), true
			}
			v, ok := vars[name]
			return v, ok
		}
	}
	for _, tc := range []struct {
		vars map[string]string
		want int
	}{
		{nil, 600},
		{map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"}, 10_000_000},
		{map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "5"}, 50},
		{map[string]string{"SVC_RATE_LIMIT_ORG_PER_MINUTE": "90"}, 90},
	} {
		cfg, err := service.LoadConfig(lookup(tc.vars))
		require.NoError(t, err)
		require.Equal(t, tc.want, cfg.RateLimitOrgPerMinute, tc.vars)
	}
	_, err := service.LoadConfig(lookup(map[string]string{"SVC_RATE_LIMIT_ORG_PER_MINUTE": "0"}))
	require.ErrorContains(t, err, "SVC_RATE_LIMIT_ORG_PER_MINUTE")
}

// TestLoadConfigStreamCeilings: a user's and an organization's ceilings on open event streams
// default to three and five principals' worth of the per-principal cap (60 and 100 with its
// default 20), and each can be set on its own.
func TestLoadConfigStreamCeilings(t *testing.T) {
	t.Parallel()
	lookup := func(vars map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if name == "SVC_INTERNAL_SECRET" {
				return strings.Repeat("s", 32), true
			}
			v, ok := vars[name]
			return v, ok
		}
	}
	for _, tc := range []struct {
		vars map[string]string
		want app.StreamLimits
	}{
		{nil, app.StreamLimits{PerPrincipal: 20, PerUser: 60, PerOrganization: 100}},
		{map[string]string{"SVC_GATEWAY_MAX_STREAMS": "3"}, app.StreamLimits{PerPrincipal: 3, PerUser: 9, PerOrganization: 15}},
		{map[string]string{"SVC_GATEWAY_MAX_STREAMS": "100000"}, app.StreamLimits{PerPrincipal: 100_000, PerUser: 300_000, PerOrganization: 500_000}},
		{map[string]string{"SVC_GATEWAY_MAX_STREAMS_PER_USER": "7", "SVC_GATEWAY_MAX_STREAMS_PER_ORG": "11"},
			app.StreamLimits{PerPrincipal: 20, PerUser: 7, PerOrganization: 11}},
	} {
		cfg, err := service.LoadConfig(lookup(tc.vars))
		require.NoError(t, err)
		require.Equal(t, tc.want, cfg.MaxStreams, tc.vars)
	}
	for _, name := range []string{"SVC_GATEWAY_MAX_STREAMS_PER_USER", "SVC_GATEWAY_MAX_STREAMS_PER_ORG"} {
		_, err := service.LoadConfig(lookup(map[string]string{name: "0"}))
		require.ErrorContains(t, err, name)
	}
}
