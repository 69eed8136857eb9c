package service_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/webhook-ingress/internal/service"
)

const org = "org_01jaaaaaaaaaaaaaaaaaaaaaaa"

func lookup(m map[string]string) func(string) (string, bool) {
	base := map[string]string{"SVC_INTERNAL_SECRET": "0123456789abcdef0123456789abcdef"}
	for k, v := range m {
		base[k] = v
	}
	return func(k string) (string, bool) { v, ok := base[k]; return v, ok }
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()

	t.Run("UnconfiguredRoutesAreDisabledAndSaySo", func(t *testing.T) {
		t.Parallel()
		cfg, err := service.LoadConfig(lookup(nil))
		require.NoError(t, err)
		var logs bytes.Buffer
		reg, err := service.NewRegistry(context.Background(), cfg, time.Now, slog.New(slog.NewJSONHandler(&logs, nil)))
		require.NoError(t, err)
		require.Empty(t, reg.Entries())
		require.Contains(t, logs.String(), `"setting":"SVC_WEBHOOK_GITHUB_SECRET"`)
		require.Contains(t, logs.String(), `"setting":"SVC_WEBHOOK_STANDARD_SECRET"`)
		require.Contains(t, logs.String(), "webhook route disabled")
	})

	t.Run("OneRouteEnabled", func(t *testing.T) {
		t.Parallel()
		cfg, err := service.LoadConfig(lookup(map[string]string{
			"SVC_WEBHOOK_STANDARD_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "SVC_WEBHOOK_STANDARD_ORG": org,
			"SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
		}))
		require.NoError(t, err)
		var logs bytes.Buffer
		reg, err := service.NewRegistry(context.Background(), cfg, time.Now, slog.New(slog.NewJSONHandler(&logs, nil)))
		require.NoError(t, err)
		require.Len(t, reg.Entries(), 1)
		require.Equal(t, "/events/:source", reg.Entries()[0].Route.Path)
		require.Contains(t, logs.String(), "webhook route enabled")
		require.Contains(t, logs.String(), `"setting":"SVC_WEBHOOK_GITHUB_SECRET"`)
	})

	// A route names its organization by slug (docs/API.md, "Webhooks"); an id is taken too.
	// Neither is checked at start-up: the organization may not exist yet.
	t.Run("OrganizationBySlugOrID", func(t *testing.T) {
		t.Parallel()
		for _, ref := range []string{"acme", "not-created-yet", org} {
			cfg, err := service.LoadConfig(lookup(map[string]string{
				"SVC_WEBHOOK_GITHUB_SECRET": "s", "SVC_WEBHOOK_GITHUB_ORG": ref, "SVC_WEBHOOK_GITHUB_WORKFLOW": "w",
			}))
			require.NoError(t, err, ref)
			require.Equal(t, ref, cfg.GitHub.Organization)
			reg, err := service.NewRegistry(context.Background(), cfg, time.Now, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			require.Len(t, reg.Entries(), 1)
			require.Equal(t, ref, reg.Entries()[0].Route.Organization)
		}
		cfg, err := service.LoadConfig(lookup(nil))
		require.NoError(t, err)
		require.Equal(t, "http://127.0.0.1:8081", cfg.IdentityURL)
	})

	t.Run("BadSettingsNameTheVariable", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			env  map[string]string
			want string
		}{
			{map[string]string{"SVC_WEBHOOK_GITHUB_SECRET": "s", "SVC_WEBHOOK_GITHUB_WORKFLOW": "w"}, "SVC_WEBHOOK_GITHUB_ORG is required"},
			{map[string]string{"SVC_WEBHOOK_GITHUB_SECRET": "s", "SVC_WEBHOOK_GITHUB_ORG": org}, "SVC_WEBHOOK_GITHUB_WORKFLOW is required"},
			{map[string]string{"SVC_WEBHOOK_STANDARD_SECRET": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "SVC_WEBHOOK_STANDARD_ORG": org, "SVC_WEBHOOK_STANDARD_WORKFLOW": "w"}, "SVC_WEBHOOK_STANDARD_SECRET: must start with whsec_"},
			{map[string]string{"SVC_ORCHESTRATOR_URL": "ftp://x"}, "SVC_ORCHESTRATOR_URL"},
			{map[string]string{"SVC_IDENTITY_URL": "ftp://x"}, "SVC_IDENTITY_URL"},
		} {
			_, err := service.LoadConfig(lookup(tc.env))
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "secrets are never echoed")
		}
	})
}
