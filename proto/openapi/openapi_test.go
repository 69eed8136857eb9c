package openapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/openapi"
)

func TestOperations(t *testing.T) {
	t.Parallel()
	ops, err := openapi.Operations()
	require.NoError(t, err)
	require.Contains(t, ops, openapi.Operation{Method: "GET", Path: "/health", Service: "gateway", Open: true})
	for _, o := range ops {
		require.Contains(t, []string{"gateway", "identity", "workflow-editor", "run-orchestrator", "scheduler", "webhook-ingress"}, o.Service, o)
	}
}
