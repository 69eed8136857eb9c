package errs_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/errs"
)

func TestCodeStatus(t *testing.T) {
	t.Parallel()
	for code, status := range map[errs.Code]int{
		errs.Unauthorized: 401, errs.NoActiveOrganization: 401, errs.NotFound: 404,
		errs.MethodNotAllowed: 405, errs.InvalidBody: 400, errs.InvalidQuery: 400,
		errs.InvalidCron: 400, errs.InvalidIfMatch: 400, errs.VersionMismatch: 412,
		errs.RateLimited: 429, errs.WorkflowNotFound: 404, errs.PayloadTooLarge: 413,
		errs.DispatchFailed: 500, errs.CancelFailed: 500, errs.LogsFailed: 500,
		errs.InvalidSignature: 401, errs.WebhookRejected: 400, errs.RunFinished: 409,
		errs.WorkflowNameTaken: 409, errs.Unavailable: 503, errs.InternalOnlyLog: 500,
		errs.InvalidOrigin: 403,
	} {
		require.Equal(t, status, code.Status(), code)
	}
}

func TestBody(t *testing.T) {
	t.Parallel()

	t.Run("InternalCauseNeverLeaks", func(t *testing.T) {
		t.Parallel()
		e := errs.From(errors.New("pq: password authentication failed for db secret"))
		require.Equal(t, map[string]any{"error": "internal"}, e.Body())
		require.Equal(t, http.StatusInternalServerError, e.Status())
	})

	t.Run("FieldsCannotOverrideCode", func(t *testing.T) {
		t.Parallel()
		e := errs.Newf(errs.VersionMismatch, "changed").With("current", 4).With("error", "x")
		require.Equal(t, map[string]any{"error": "version_mismatch", "message": "changed", "current": 4}, e.Body())
	})

	t.Run("DecodeRoundTrip", func(t *testing.T) {
		t.Parallel()
		e := errs.Decode(429, []byte(`{"error":"rate_limited","retryAfterMs":1200,"message":"slow down"}`))
		require.Equal(t, errs.RateLimited, e.Code)
		require.Equal(t, "slow down", e.Message)
		require.InDelta(t, 1200.0, e.Fields["retryAfterMs"], 0)

		bad := errs.Decode(502, []byte("<html>bad gateway</html>"))
		require.Equal(t, errs.InternalOnlyLog, bad.Code)
	})
}
