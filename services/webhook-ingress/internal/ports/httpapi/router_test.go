package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/openapi"
	"svc.dev/services/webhook-ingress/internal/ports/httpapi"
	"svc.dev/services/webhook-ingress/internal/service"
)

// With every shipped route enabled, the registry serves exactly the operations the OpenAPI
// document gives this service.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	want, err := openapi.RoutesOf("webhook-ingress")
	require.NoError(t, err)
	cfg, err := service.LoadConfig(mapLookup(map[string]string{
		"SVC_INTERNAL_SECRET":           "0123456789abcdef0123456789abcdef",
		"SVC_WEBHOOK_GITHUB_SECRET":     "gh-secret",
		"SVC_WEBHOOK_GITHUB_ORG":        "org_01jaaaaaaaaaaaaaaaaaaaaaaa",
		"SVC_WEBHOOK_GITHUB_WORKFLOW":   "on-push",
		"SVC_WEBHOOK_STANDARD_SECRET":   "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"SVC_WEBHOOK_STANDARD_ORG":      "org_01jaaaaaaaaaaaaaaaaaaaaaaa",
		"SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
	}))
	require.NoError(t, err)
	registry, err := service.NewRegistry(context.Background(), cfg, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.ElementsMatch(t, want, httpapi.Routes(registry))
}

func mapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
