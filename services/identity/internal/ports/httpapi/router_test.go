package httpapi_test

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
	"svc.dev/proto/openapi"
	"svc.dev/services/identity/internal/app/apptest"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/ports/httpapi"
)

// newServer builds the HTTP port over the in-memory application.
func newServer(t testing.TB, b *apptest.Bundle) *httpapi.Server {
	t.Helper()
	signer, err := session.NewSigner([]byte(strings.Repeat("s", 32)))
	require.NoError(t, err)
	public, err := url.Parse("http://localhost:8080")
	require.NoError(t, err)
	origins, err := httpapi.NewOrigins("http://localhost:8080", "http://client.test")
	require.NoError(t, err)
	return httpapi.NewServer(b.App, httpapi.Config{PublicURL: public, Origins: origins, Signer: signer}, slog.New(slog.DiscardHandler))
}

// The router serves exactly the operations the OpenAPI document gives this service.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	want, err := openapi.RoutesOf("identity")
	require.NoError(t, err)
	require.ElementsMatch(t, want, web.Routes(httpapi.NewRouter(newServer(t, apptest.New(t, apptest.Options{})))))
}
