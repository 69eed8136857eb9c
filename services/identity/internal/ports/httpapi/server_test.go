package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/app/apptest"
	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/ports/httpapi"
)

// authRoutes are the routes fuzzed with arbitrary bodies and paths.
func authRoutes() []struct{ method, path string } {
	return []struct{ method, path string }{
		{http.MethodPost, "/api/auth/sign-up/email"},
		{http.MethodPost, "/api/auth/sign-in/email"},
		{http.MethodPost, "/api/auth/sign-out"},
		{http.MethodGet, "/api/auth/get-session"},
		{http.MethodPost, "/api/auth/change-password"},
		{http.MethodPost, "/api/auth/request-password-reset"},
		{http.MethodPost, "/api/auth/reset-password"},
		{http.MethodPost, "/api/auth/organization/create"},
		{http.MethodPost, "/api/auth/organization/set-active"},
		{http.MethodGet, "/api/auth/organization/list"},
		{http.MethodPost, "/api/auth/organization/invite-member"},
		{http.MethodPost, "/api/auth/organization/accept-invitation"},
		{http.MethodGet, "/api/auth/organization/list-members"},
		{http.MethodPost, "/api/auth/organization/remove-member"},
		{http.MethodPost, "/api/auth/organization/leave"},
		{http.MethodPost, "/api/auth/api-key/create"},
		{http.MethodGet, "/api/auth/api-key/list"},
		{http.MethodPost, "/api/auth/api-key/delete"},
		{http.MethodPost, "/api/auth/api-key/verify"},
		{http.MethodDelete, "/api/auth/api-key/"},
		{http.MethodPost, "/api/bootstrap"},
	}
}

type fuzzBundle struct {
	handler http.Handler
	token   string
}

func setupFuzz(t testing.TB) *fuzzBundle {
	t.Helper()
	b := apptest.New(t, apptest.Options{Bootstrap: true})
	res, err := b.App.Commands.SignUp.Handle(context.Background(), command.SignUp{Email: "ann@x.io", Password: "correct horse"})
	require.NoError(t, err)
	return &fuzzBundle{handler: httpapi.NewRouter(newServer(t, b)), token: string(res.Token)}
}

func (f *fuzzBundle) serve(method, path, query, body string, withSession bool) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://identity"+path, strings.NewReader(body))
	req.URL.RawQuery = query
	req.Header.Set("Origin", "http://client.test")
	req.Header.Set("Content-Type", "application/json")
	if withSession {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return rec
}

// Client input never makes a 5xx: hostile bodies, ids, query values and NULs are 4xx.
func TestHostileInputIsNeverAServerError(t *testing.T) {
	t.Parallel()
	f := setupFuzz(t)
	bodies := []string{``, `null`, `[]`, `"x"`, `{`, `{"email":{}}`, `{"email":["a"]}`, `{"name":"a\u0000b"}`,
		`{"email":"ann@x.io","password":"correct horse","name":"\u0000"}`, `{"organizationSlug":"\u0000"}`,
		`{"organizationId":"org_\u0000"}`, `{"organizationId":"%00"}`, `{"invitationId":"x"}`, `{"invitationId":"inv_01"}`,
		`{"memberIdOrEmail":"x@@"}`, `{"keyId":"key_zz"}`, `{"key":"svc_"}`, `{"expiresIn":1e308}`, `{"expiresIn":-1}`,
		`{"token":"` + strings.Repeat("t", 300) + `","newPassword":"long enough"}`, `{"organizationId":7}`,
		`{"email":"` + strings.Repeat("a", 300) + `@x.io","password":"long enough"}`, `{"role":["admin"]}`,
		`{"slug":"` + strings.Repeat("s", 100) + `","name":"x"}`, `{"redirectTo":"javascript:alert(1)","email":"ann@x.io"}`}
	for _, rt := range authRoutes() {
		for _, body := range bodies {
			for _, withSession := range []bool{false, true} {
				path := rt.path
				if strings.HasSuffix(path, "/api-key/") {
					path += "%00"
				}
				rec := f.serve(rt.method, path, "organizationId=%00", body, withSession)
				require.Less(t, rec.Code, 500, "%s %s %s: %s", rt.method, path, body, rec.Body.String())
			}
		}
	}
}

// FuzzAuthRoutes: no body sent to any route makes a panic or a 5xx.
func FuzzAuthRoutes(f *testing.F) {
	fb := setupFuzz(f)
	f.Add(uint8(0), `{"email":"a@x.io","password":"long enough"}`, "", true)
	f.Add(uint8(8), `{"name":"x","slug":"x"}`, "", true)
	f.Add(uint8(12), ``, "organizationId=org_x", true)
	f.Add(uint8(19), `{}`, "", false)
	f.Fuzz(func(t *testing.T, route uint8, body, query string, withSession bool) {
		routes := authRoutes()
		rt := routes[int(route)%len(routes)]
		path := rt.path
		if strings.HasSuffix(path, "/api-key/") {
			path += "key_x"
		}
		rec := fb.serve(rt.method, path, strings.ReplaceAll(query, "#", ""), body, withSession)
		require.Less(t, rec.Code, 500, "%s %s %q: %s", rt.method, path, body, rec.Body.String())
	})
}

// When every password-hashing slot is taken the client is told to retry: RATE_LIMITED on the
// auth routes, rate_limited on the bootstrap, both with Retry-After.
func TestBusyHasherIsRetryLater(t *testing.T) {
	t.Parallel()
	b := apptest.New(t, apptest.Options{Bootstrap: true})
	h := httpapi.NewRouter(newServer(t, b))
	b.Hasher.Busy.Store(true)
	serve := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://identity"+path, strings.NewReader(body))
		req.Header.Set("Origin", "http://client.test")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := serve("/api/auth/sign-up/email", `{"email":"ann@x.io","password":"correct horse"}`)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"code":"RATE_LIMITED","message":"Too many password checks at once; retry shortly","retryAfterMs":1000}`, rec.Body.String())
	require.Equal(t, "1", rec.Header().Get("Retry-After"))

	rec = serve("/api/bootstrap", `{"email":"root@x.io","password":"correct horse"}`)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"error":"rate_limited","message":"too many password checks at once; retry shortly","retryAfterMs":1000}`, rec.Body.String())
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
}
