package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/web"
	"svc.dev/proto/errs"
	"svc.dev/services/gateway/internal/ports/httpapi"
)

// trustedOrigin is the public URL's origin in the gateway tests.
const trustedOrigin = "https://app.example.com"

func testOrigins(t *testing.T) web.Origins {
	t.Helper()
	o, err := web.NewOrigins(trustedOrigin, "http://localhost:8080")
	require.NoError(t, err)
	return o
}

// TestCookieWritesNeedATrustedPage: a write the session cookie authenticates is refused with
// 403 invalid_origin unless a trusted page sent it (issue 21, finding 6: a form of another site,
// or of a sibling subdomain past SameSite=Lax, stored a workflow). Bearer tokens and API keys,
// which no other site's page can make a browser send, and reads are unaffected.
func TestCookieWritesNeedATrustedPage(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newTestBundle(t, newLocalLimiter(ratelimit.PerMinute(1_000_000), time.Now))
	}

	refused := []struct {
		name string
		hdr  []string
	}{
		{"CrossSite", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}},
		{"SiblingSubdomain", []string{"Origin", "https://evil.app.example.com", "Sec-Fetch-Site", "same-site"}},
		{"OtherScheme", []string{"Origin", "http://app.example.com"}},
		{"NullOrigin", []string{"Origin", "null", "Sec-Fetch-Site", "same-origin"}},
		{"NoOriginSameSite", []string{"Sec-Fetch-Site", "same-site", "Referer", trustedOrigin + "/workflows"}},
		{"NoOriginUntrustedReferer", []string{"Referer", "https://evil.example/page"}},
		{"NothingToTell", nil},
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, tc := range refused {
			t.Run("Refuses"+method+tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				hdr := append([]string{"Cookie", cookie, "Content-Type", "text/plain"}, tc.hdr...)
				resp := b.do(t, method, "/api/workflows", strings.NewReader(`{"name":"csrf"}`), hdr...)
				resp.requireError(t, http.StatusForbidden, errs.InvalidOrigin)
				b.requireNoHits(t)
			})
		}
	}

	t.Run("RefusesMCPWithCookie", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, http.MethodPost, "/api/mcp", strings.NewReader(mcpCall("schedules_delete", `{"schedule_id":"sch_1"}`)),
			"Cookie", cookie, "Content-Type", "application/json", "Accept", "application/json, text/event-stream",
			"Origin", "https://evil.example")
		resp.requireError(t, http.StatusForbidden, errs.InvalidOrigin)
		b.requireNoHits(t)
	})

	allowed := []struct {
		name   string
		method string
		hdr    []string
		want   internalauth.Identity
	}{
		{"TrustedOrigin", http.MethodPost, []string{"Cookie", cookie, "Origin", trustedOrigin, "Sec-Fetch-Site", "same-origin"}, sessionIdentity},
		{"TrustedOriginDefaultPort", http.MethodDelete, []string{"Cookie", cookie, "Origin", "https://APP.example.com:443"}, sessionIdentity},
		{"SameOriginWithoutOrigin", http.MethodPost, []string{"Cookie", cookie, "Sec-Fetch-Site", "same-origin"}, sessionIdentity},
		{"TrustedReferer", http.MethodPut, []string{"Cookie", cookie, "Referer", trustedOrigin + "/workflows/wf_1"}, sessionIdentity},
		{"ReadFromAnywhere", http.MethodGet, []string{"Cookie", cookie, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, sessionIdentity},
		{"BearerSession", http.MethodPost, []string{"Authorization", sessionToken, "Origin", "https://evil.example"}, sessionIdentity},
		{"BearerKey", http.MethodPost, []string{"Authorization", "Bearer " + apiKey, "Origin", "https://evil.example"}, keyIdentity},
		// The cookie is dropped, the key authenticates: the cookie's session is not used.
		{"KeyBesideCookie", http.MethodPost, []string{"X-Api-Key", apiKey, "Cookie", cookie, "Origin", "https://evil.example"}, keyIdentity},
	}
	for _, tc := range allowed {
		t.Run("Allows"+tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			resp := b.do(t, tc.method, "/api/workflows", strings.NewReader(`{}`), tc.hdr...)
			require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
			h := b.onlyHit(t, httpapi.Editor)
			require.NoError(t, h.VerifyErr)
			require.Equal(t, tc.want, h.Identity)
			requireNoClientCredentials(t, h.Header)
		})
	}

	// The MCP tools' own requests (a DELETE here) go back through the gateway with the
	// caller's cookie; the POST /api/mcp that carried them was checked, so they pass.
	t.Run("AllowsMCPToolWritesWithCookieFromTrustedPage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, http.MethodPost, "/api/mcp", strings.NewReader(mcpCall("schedules_delete", `{"schedule_id":"sch_1"}`)),
			"Cookie", cookie, "Content-Type", "application/json", "Accept", "application/json, text/event-stream",
			"Origin", trustedOrigin)
		require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
		h := b.onlyHit(t, httpapi.Scheduler)
		require.Equal(t, http.MethodDelete, h.Method)
		require.Equal(t, sessionIdentity, h.Identity)
	})
}

// mcpCall is a JSON-RPC tools/call of the stateless MCP endpoint.
func mcpCall(tool, args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}
