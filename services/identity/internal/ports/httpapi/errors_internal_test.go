package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/app/auth"
)

// A limit that reopens in under a millisecond still says when to retry: retryAfterMs is at
// least 1 and rounded up, never 0 (found by the HTTP fuzzer on reset-password).
func TestRateLimitedRetryAfterIsAtLeastOneMillisecond(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wait time.Duration
		ms   string
	}{{300 * time.Microsecond, "1"}, {1500 * time.Microsecond, "2"}, {2 * time.Second, "2000"}} {
		rec := httptest.NewRecorder()
		(&Server{}).writeAuthError(rec, httptest.NewRequest(http.MethodPost, "/api/auth/reset-password", nil), &auth.RateLimitedError{RetryAfter: tc.wait})
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		require.JSONEq(t, `{"code":"RATE_LIMITED","message":"Too many attempts; retry later","retryAfterMs":`+tc.ms+`}`, rec.Body.String(), tc.wait)
	}
}
