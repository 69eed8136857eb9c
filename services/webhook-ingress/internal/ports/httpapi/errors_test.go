package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/errs"
	"svc.dev/services/webhook-ingress/internal/app/command"
	"svc.dev/services/webhook-ingress/internal/app/port"
	"svc.dev/services/webhook-ingress/internal/domain/route"
)

// The error table gives every refusal a sender can cause a 4xx with its code in docs/API.md;
// only an orchestrator that cannot answer is a 5xx (503), and nothing is a 500 but a bug.
func TestToAppError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		status int
		code   errs.Code
	}{
		{&route.SignatureError{Reason: "stale"}, http.StatusUnauthorized, errs.InvalidSignature},
		{fmt.Errorf("wrapped: %w", &route.SignatureError{Reason: "x"}), http.StatusUnauthorized, errs.InvalidSignature},
		{&route.RejectedError{Reason: "not JSON"}, http.StatusBadRequest, errs.WebhookRejected},
		{&command.InvalidInputError{Issues: []command.Issue{{Path: "/event", Message: "want object"}}}, http.StatusBadRequest, errs.InvalidBody},
		{fmt.Errorf("route: %w", port.ErrWorkflowNotFound), http.StatusNotFound, errs.WorkflowNotFound},
		{&port.DispatchRejectedError{Code: "workflow_invalid", Message: "no trigger"}, http.StatusBadRequest, errs.WorkflowInvalid},
		{&port.DispatchRejectedError{Code: "invalid_body", Message: "input_schema"}, http.StatusBadRequest, errs.InvalidBody},
		{&port.DispatchRejectedError{Code: "something_new", Message: "?"}, http.StatusBadRequest, errs.WebhookRejected},
		{&port.UnavailableError{Peer: "run-orchestrator", Err: errors.New("refused")}, http.StatusServiceUnavailable, errs.Unavailable},
		{&command.InputTooLargeError{Size: 1 << 20, Max: 1<<20 - 2000}, http.StatusRequestEntityTooLarge, errs.PayloadTooLarge},
		{&port.UnavailableError{Peer: "identity", Err: errors.New("refused")}, http.StatusServiceUnavailable, errs.Unavailable},
		{errs.Newf(errs.PayloadTooLarge, "too large"), http.StatusRequestEntityTooLarge, errs.PayloadTooLarge},
		{errors.New("a bug"), http.StatusInternalServerError, errs.InternalOnlyLog},
	} {
		got := toAppError(tc.err)
		require.Equal(t, tc.code, got.Code, "%v", tc.err)
		require.Equal(t, tc.status, got.Status(), "%v", tc.err)
		if tc.code == errs.InvalidBody {
			require.NotEmpty(t, got.Body()["issues"], "%v", tc.err)
		}
	}
}
