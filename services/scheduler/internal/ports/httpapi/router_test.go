package httpapi_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
	"svc.dev/proto/openapi"
	"svc.dev/services/scheduler/internal/app"
	"svc.dev/services/scheduler/internal/ports/httpapi"
)

// The router serves exactly the operations the OpenAPI document gives this service.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	want, err := openapi.RoutesOf("scheduler")
	require.NoError(t, err)
	// Routing only: no handler runs, so the use cases can stay unset.
	require.ElementsMatch(t, want, web.Routes(httpapi.NewRouter(app.Application{}, slog.New(slog.DiscardHandler))))
}
