package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
	"svc.dev/proto/openapi"
	"svc.dev/services/run-orchestrator/internal/ports/httpapi"
)

// The router serves exactly the operations the OpenAPI document gives this service.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	want, err := openapi.RoutesOf("run-orchestrator")
	require.NoError(t, err)
	require.ElementsMatch(t, want, web.Routes(httpapi.NewRouter(httpapi.Handlers{}, nil)))
}
