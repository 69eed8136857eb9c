package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
	"svc.dev/proto/errs"
	"svc.dev/proto/openapi"
)

// GET /api/openapi.json is open and answered by the gateway itself: the document the route
// tests read (proto/openapi), as JSON, byte for byte what openapi.JSON gives.
func TestOpenAPIDocumentRoute(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newTestBundle(t, newLocalLimiter(ratelimit.PerMinute(1_000_000), time.Now))
	}
	want, err := openapi.JSON()
	require.NoError(t, err)

	t.Run("ServedOpenAsJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, http.MethodGet, "/api/openapi.json", nil)
		require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
		require.Equal(t, "application/json", resp.header.Get("Content-Type"))
		require.Equal(t, want, resp.body)
		require.Equal(t, strconv.Itoa(len(want)), resp.header.Get("Content-Length"))
		require.NotEmpty(t, resp.header.Get("X-Request-Id"))
		// Open: no rate-limit token taken, identity not asked, no service reached.
		require.Empty(t, resp.header.Get("RateLimit-Limit"))
		require.Empty(t, b.resolver.Calls())
		b.requireNoHits(t)

		var doc struct {
			OpenAPI string                    `json:"openapi"`
			Paths   map[string]map[string]any `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(resp.body, &doc))
		require.Equal(t, "3.1.0", doc.OpenAPI)
		require.Contains(t, doc.Paths, "/api/openapi.json")
		require.Contains(t, doc.Paths, "/api/workflows/{id}/operations")
	})

	t.Run("CredentialsChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, http.MethodGet, "/api/openapi.json", nil, "Authorization", "Bearer not-a-token")
		require.Equal(t, http.StatusOK, resp.status)
		require.Equal(t, want, resp.body)
		require.Empty(t, b.resolver.Calls())
	})

	t.Run("HeadAndConditional", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		head := b.do(t, http.MethodHead, "/api/openapi.json", nil)
		require.Equal(t, http.StatusOK, head.status)
		require.Empty(t, head.body)
		etag := head.header.Get("ETag")
		require.Regexp(t, `^"[0-9a-f]{32}"$`, etag)

		same := b.do(t, http.MethodGet, "/api/openapi.json", nil, "If-None-Match", etag)
		require.Equal(t, http.StatusNotModified, same.status)
		require.Empty(t, same.body)
		weak := b.do(t, http.MethodGet, "/api/openapi.json", nil, "If-None-Match", `"other", W/`+etag)
		require.Equal(t, http.StatusNotModified, weak.status)
		other := b.do(t, http.MethodGet, "/api/openapi.json", nil, "If-None-Match", `"other"`)
		require.Equal(t, http.StatusOK, other.status)
		require.Equal(t, want, other.body)
	})

	t.Run("OtherMethodsAre405", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			resp := b.do(t, m, "/api/openapi.json", nil)
			resp.requireError(t, http.StatusMethodNotAllowed, errs.MethodNotAllowed)
			require.Equal(t, "GET, HEAD", resp.header.Get("Allow"))
		}
		b.requireNoHits(t)
	})

	t.Run("LookalikesStayGuarded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, p := range []string{"/api/openapi.json/", "/api/openapi.jsonx", "/api/openapi.yaml", "/api/openapi"} {
			b.do(t, http.MethodGet, p, nil).requireError(t, http.StatusUnauthorized, errs.Unauthorized)
		}
		// A path that cleans to the document is the document.
		resp := b.do(t, http.MethodGet, "/api/./x/../openapi.json", nil)
		require.Equal(t, http.StatusOK, resp.status)
		require.Equal(t, want, resp.body)
	})
}
