package httpapi_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
	"svc.dev/proto/connectors"
	"svc.dev/proto/openapi"
	"svc.dev/services/workflow-editor/internal/adapters/memory"
	"svc.dev/services/workflow-editor/internal/app"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/ports/httpapi"
)

// The router serves exactly the operations the OpenAPI document gives this service.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	cat, err := catalog.New(connectors.MustLoad())
	require.NoError(t, err)
	application := app.New(memory.NewWorkflowRepository(), cat, time.Now)
	want, err := openapi.RoutesOf("workflow-editor")
	require.NoError(t, err)
	require.ElementsMatch(t, want, web.Routes(httpapi.NewRouter(application, slog.New(slog.DiscardHandler))))
}
