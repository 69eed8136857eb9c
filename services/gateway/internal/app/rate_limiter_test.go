package app_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/telemetry"
	"svc.dev/services/gateway/internal/app"
)

func TestBucketKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		id   internalauth.Identity
		want string
	}{
		{"Session", internalauth.Identity{UserID: "usr_1", OrganizationID: "org_1", AuthMode: internalauth.ModeSession}, "gw:org_1:usr_1"},
		{"SessionInAnotherOrganization", internalauth.Identity{UserID: "usr_1", OrganizationID: "org_2", AuthMode: internalauth.ModeSession}, "gw:org_2:usr_1"},
		{"APIKey", internalauth.Identity{OrganizationID: "org_1", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1"}, "gw:org_1:key_1"},
		// A key's bucket is the key's, whoever created it.
		{"APIKeyWithUser", internalauth.Identity{UserID: "usr_1", OrganizationID: "org_1", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1"}, "gw:org_1:key_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, app.BucketKey(tc.id))
		})
	}
}

// scripted answers Allowed from a list, in order.
type scripted struct{ answers []bool }

func (s *scripted) Allow(context.Context, internalauth.Identity) ratelimit.Result {
	a := s.answers[0]
	s.answers = s.answers[1:]
	return ratelimit.Result{Allowed: a, Limit: 1}
}

func TestCountRefusals(t *testing.T) {
	t.Parallel()

	t.Run("CountsEachRefusal", func(t *testing.T) {
		t.Parallel()
		tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
		l := app.CountRefusals(&scripted{answers: []bool{true, false, true, false, false}}, tel.Meter)
		var allowed []bool
		for range 5 {
			allowed = append(allowed, l.Allow(t.Context(), internalauth.Identity{OrganizationID: "org_1", UserID: "usr_1"}).Allowed)
		}
		require.Equal(t, []bool{true, false, true, false, false}, allowed, "decisions pass through")
		rec := httptest.NewRecorder()
		tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		require.Contains(t, rec.Body.String(), "svc_gateway_rate_limited_total 3\n")
	})

	t.Run("PanicsOnMissingDependency", func(t *testing.T) {
		t.Parallel()
		tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
		require.PanicsWithValue(t, "nil rate limiter", func() { app.CountRefusals(nil, tel.Meter) })
		require.PanicsWithValue(t, "nil meter provider", func() { app.CountRefusals(&scripted{}, nil) })
	})
}
