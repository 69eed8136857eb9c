package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
	"svc.dev/services/gateway/internal/ports/httpapi"
)

// TestSpansKeepNoQueryValue: POST /api/auth/reset-password?token=... reaches identity with its
// token, and no span of the gateway (its server span, its client span to identity) records it.
func TestSpansKeepNoQueryValue(t *testing.T) {
	t.Parallel()
	const token = "rst_9d2f0a7c1b"
	b := newTestBundle(t, newLocalLimiter(ratelimit.PerMinute(1_000_000), time.Now))
	resp := b.do(t, http.MethodPost, "/api/auth/reset-password?token="+token, strings.NewReader(`{"newPassword":"x"}`),
		"Content-Type", "application/json", "Origin", trustedOrigin)
	require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
	require.Equal(t, "token="+token, b.onlyHit(t, httpapi.Identity).RawQuery)

	require.Eventually(t, func() bool { return len(b.spans.Ended()) >= 2 }, 5*time.Second, 5*time.Millisecond)
	for _, s := range b.spans.Ended() {
		require.NotContains(t, s.Name(), token)
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.String(), token, "span %q attribute %s", s.Name(), kv.Key)
		}
	}
}
