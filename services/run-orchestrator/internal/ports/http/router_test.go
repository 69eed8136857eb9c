package http_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
	"svc.dev/proto/openapi"
	httpport "svc.dev/services/run-orchestrator/internal/ports/http"
)

// The router serves exactly the operations the OpenAPI document gives this service.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	want, err := openapi.RoutesOf("run-orchestrator")
	require.NoError(t, err)
	require.ElementsMatch(t, want, web.Routes(httpport.NewRouter(httpport.Handlers{}, nil)))
}
