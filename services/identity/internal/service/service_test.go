package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/service"
)

const (
	origin   = "http://client.test"
	password = "correct horse battery"
	secret   = "0123456789abcdef0123456789abcdef"
)

type testBundle struct {
	srv    *httptest.Server
	logs   *testkit.SyncBuffer
	signer internalauth.Signer
}

func setup(t *testing.T, env map[string]string) *testBundle {
	t.Helper()
	return setupConfig(t, env, nil)
}

// setupConfig is setup with a last say over the config (for what is not a setting).
func setupConfig(t *testing.T, env map[string]string, adjust func(*service.Config)) *testBundle {
	t.Helper()
	vars := map[string]string{
		"SVC_DATABASE_URL":    testkit.NewDatabase(t),
		"SVC_REDIS_URL":       testkit.RedisURL(t),
		"SVC_REDIS_PREFIX":    testkit.Name("idt") + ":",
		"SVC_INTERNAL_SECRET": secret,
		"SVC_TRUSTED_ORIGINS": origin,
		"SVC_IDENTITY_ADDR":   ":0",
		"SVC_MAIL":            "log", // the tests read reset links from the log
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := service.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	require.NoError(t, err)
	if adjust != nil {
		adjust(&cfg)
	}
	logs := &testkit.SyncBuffer{}
	app, err := service.NewApplication(context.Background(), cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	signer, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	return &testBundle{srv: srv, logs: logs, signer: signer}
}

type response struct {
	Status int
	Header http.Header
	Raw    string
	Body   map[string]any
}

// client is one caller: the headers it sends with every request and, when it stands for a
// client behind the gateway, the address the gateway signs into each request.
type client struct {
	t       *testing.T
	b       *testBundle
	headers map[string]string
	vouchIP string
}

// viaGateway is a client behind the gateway at ip: every request carries ip signed as the
// gateway signs it (internalauth, service "gateway").
func (b *testBundle) viaGateway(t *testing.T, ip string, kv ...string) *client {
	c := b.client(t, kv...)
	c.vouchIP = ip
	return c
}

func (b *testBundle) client(t *testing.T, kv ...string) *client {
	c := &client{t: t, b: b, headers: map[string]string{"Origin": origin}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.headers[kv[i]] = kv[i+1]
	}
	return c
}

func (c *client) with(kv ...string) *client {
	cp := &client{t: c.t, b: c.b, headers: map[string]string{}, vouchIP: c.vouchIP}
	for k, v := range c.headers {
		cp.headers[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(cp.headers, kv[i])
			continue
		}
		cp.headers[kv[i]] = kv[i+1]
	}
	return cp
}

func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		require.NoError(c.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.b.srv.URL+path, rd)
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if c.vouchIP != "" {
		c.b.signer.Sign(req.Header, req.Method, req.URL.Path, req.URL.RawQuery,
			internalauth.Identity{AuthMode: internalauth.ModeService, Service: "gateway", ClientIP: c.vouchIP}, time.Now())
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	out := response{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &out.Body)
	return out
}

func (c *client) post(path string, body any) response {
	c.t.Helper()
	return c.do(http.MethodPost, path, body)
}
func (c *client) get(path string) response { c.t.Helper(); return c.do(http.MethodGet, path, nil) }

func email(prefix string) string {
	return prefix + "-" + strings.TrimPrefix(testkit.Name(""), "_") + "@example.com"
}

// account is a signed-up user and a client carrying its session token.
type account struct {
	email, userID, token, orgID string
	c                           *client
}

func (b *testBundle) signUp(t *testing.T, prefix string) account {
	t.Helper()
	a := account{email: email(prefix)}
	r := b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": a.email, "password": password, "name": prefix})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	a.token = r.Body["token"].(string)
	a.userID = obj(t, r.Body["user"])["id"].(string)
	a.c = b.client(t, "Authorization", "Bearer "+a.token)
	a.orgID = obj(t, a.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"].(string)
	return a
}

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "want an object, got %T %v", v, v)
	return m
}

func arr(t *testing.T, raw string) []any {
	t.Helper()
	var a []any
	require.NoError(t, json.Unmarshal([]byte(raw), &a), raw)
	return a
}

// requireCode checks an auth-layer error.
func requireCode(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, r.Raw)
	require.Equal(t, code, r.Body["code"], r.Raw)
	require.NotEmpty(t, r.Body["message"], r.Raw)
}

// requireError checks a service error.
func requireError(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, r.Raw)
	require.Equal(t, code, r.Body["error"], r.Raw)
}

var millis = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`) //nolint:gochecknoglobals // test helper

// resolve calls the internal Resolve RPC as the gateway does.
func (b *testBundle) resolve(t *testing.T, req *identityv1.ResolveRequest) *identityv1.ResolveResponse {
	t.Helper()
	hc := &http.Client{Transport: internalauth.Transport{Signer: b.signer, Service: "gateway", Base: http.DefaultTransport, Now: time.Now}}
	res, err := identityv1connect.NewIdentityServiceClient(hc, b.srv.URL).Resolve(context.Background(), connect.NewRequest(req))
	require.NoError(t, err)
	return res.Msg
}

func TestAuthRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	t.Run("SignUp", func(t *testing.T) {
		t.Parallel()
		e := email("signup")
		r := b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": strings.ToUpper(e), "password": password, "name": "Ann", "callbackURL": "/ignored"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		tok := r.Body["token"].(string)
		require.Regexp(t, `^[A-Za-z0-9]{32}$`, tok)
		u := obj(t, r.Body["user"])
		require.Equal(t, e, u["email"])
		require.Equal(t, "Ann", u["name"])
		require.Equal(t, false, u["emailVerified"])
		require.Regexp(t, `^usr_`, u["id"])
		require.Regexp(t, millis, u["createdAt"])

		signed := r.Header.Get("Set-Auth-Token")
		require.True(t, strings.HasPrefix(signed, tok+"."), signed)
		require.Contains(t, r.Header.Get("Access-Control-Expose-Headers"), "set-auth-token")
		cookie := r.Header.Get("Set-Cookie")
		require.True(t, strings.HasPrefix(cookie, "svc.session_token="+url.QueryEscape(signed)+";"), cookie)
		for _, attr := range []string{"Path=/", "Max-Age=604800", "HttpOnly", "SameSite=Lax"} {
			require.Contains(t, cookie, attr)
		}
		require.NotContains(t, cookie, "Secure", "the public URL is http")

		requireCode(t, b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": e, "password": password}), 422, "USER_ALREADY_EXISTS")
		requireCode(t, b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": email("s"), "password": "1234567"}), 400, "PASSWORD_TOO_SHORT")
		requireCode(t, b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": email("s"), "password": strings.Repeat("p", 129)}), 400, "PASSWORD_TOO_LONG")
		for _, body := range []any{"{not json", `"a string"`, `[]`, map[string]any{"password": password},
			map[string]any{"email": 42, "password": password}, map[string]any{"email": "not-an-email", "password": password}} {
			requireCode(t, b.client(t).post("/api/auth/sign-up/email", body), 400, "VALIDATION_ERROR")
		}
		r = b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": 42, "password": password})
		require.Contains(t, r.Body["message"], "email")
	})

	t.Run("OriginIsRequiredOnEveryMutatingCall", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "origin")
		body := map[string]any{"email": email("o"), "password": password}
		requireCode(t, b.client(t).with("Origin", "").post("/api/auth/sign-up/email", body), 403, "MISSING_OR_NULL_ORIGIN")
		requireCode(t, b.client(t).with("Origin", "null").post("/api/auth/sign-up/email", body), 403, "MISSING_OR_NULL_ORIGIN")
		requireCode(t, b.client(t).with("Origin", "http://evil.test").post("/api/auth/sign-up/email", body), 403, "INVALID_ORIGIN")
		requireCode(t, b.client(t).with("Origin", "http://client.test.evil.test").post("/api/auth/sign-up/email", body), 403, "INVALID_ORIGIN")
		// Bearer-authenticated mutations need it too (whatever the credential), and so does DELETE.
		requireCode(t, a.c.with("Origin", "").post("/api/auth/sign-out", map[string]any{}), 403, "MISSING_OR_NULL_ORIGIN")
		requireCode(t, a.c.with("Origin", "").do(http.MethodDelete, "/api/auth/api-key/key_x", nil), 403, "MISSING_OR_NULL_ORIGIN")
		// GETs do not; the public URL's origin and a Referer are trusted.
		require.Equal(t, http.StatusOK, a.c.with("Origin", "").get("/api/auth/get-session").Status)
		require.Equal(t, http.StatusOK, b.client(t).with("Origin", "http://localhost:8080").post("/api/auth/sign-up/email", body).Status)
		body["email"] = email("o")
		require.Equal(t, http.StatusOK, b.client(t).with("Origin", "", "Referer", origin+"/login?x=1").post("/api/auth/sign-up/email", body).Status)
	})

	t.Run("SignIn", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "signin")
		r := b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password, "rememberMe": false})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, false, r.Body["redirect"])
		require.NotEqual(t, a.token, r.Body["token"])
		require.Equal(t, a.userID, obj(t, r.Body["user"])["id"])
		require.NotContains(t, r.Header.Get("Set-Cookie"), "Max-Age", "rememberMe false: a browser-session cookie")
		require.True(t, strings.HasPrefix(r.Header.Get("Set-Auth-Token"), r.Body["token"].(string)+"."))

		requireCode(t, b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "wrong password"}), 401, "INVALID_CREDENTIALS")
		requireCode(t, b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": email("nobody"), "password": password}), 404, "USER_NOT_FOUND")
		requireCode(t, b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email}), 400, "VALIDATION_ERROR")
	})

	t.Run("SignInAttemptsAreLimitedPerIPAndEmail", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "brute")
		// Through the gateway, the client address is the one it signs into the request.
		attacker := b.viaGateway(t, "198.51.100.7")
		for range 10 {
			requireCode(t, attacker.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "guess guess"}), 401, "INVALID_CREDENTIALS")
		}
		r := attacker.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password})
		requireCode(t, r, 429, "RATE_LIMITED")
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Positive(t, r.Body["retryAfterMs"])
		// A forwarding header changes nothing; another client address has its own bucket.
		requireCode(t, b.viaGateway(t, "198.51.100.7", "X-Forwarded-For", "203.0.113.1").post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password}), 429, "RATE_LIMITED")
		require.Equal(t, http.StatusOK, b.viaGateway(t, "198.51.100.8").post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password}).Status)
	})

	t.Run("GetSessionAndSignOut", func(t *testing.T) {
		t.Parallel()
		anon := b.client(t).get("/api/auth/get-session")
		require.Equal(t, http.StatusOK, anon.Status)
		require.Equal(t, "null", strings.TrimSpace(anon.Raw))

		a := b.signUp(t, "session")
		r := a.c.get("/api/auth/get-session")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		s, u := obj(t, r.Body["session"]), obj(t, r.Body["user"])
		require.Regexp(t, `^ses_`, s["id"])
		require.Equal(t, a.userID, s["userId"])
		require.Equal(t, a.token, s["token"])
		require.Regexp(t, `^org_`, s["activeOrganizationId"])
		require.Equal(t, a.email, u["email"])
		for _, f := range []string{"expiresAt", "createdAt", "updatedAt"} {
			require.Regexp(t, millis, s[f], f)
		}
		expires, err := time.Parse(time.RFC3339, s["expiresAt"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(7*24*time.Hour), expires, time.Minute)

		// The same session by cookie and by the signed bearer value.
		signIn := b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password})
		cookie := strings.SplitN(signIn.Header.Get("Set-Cookie"), ";", 2)[0]
		byCookie := b.client(t, "Cookie", "theme=dark; "+cookie)
		require.Equal(t, signIn.Body["token"], obj(t, byCookie.get("/api/auth/get-session").Body["session"])["token"])
		bySigned := b.client(t, "Authorization", "Bearer "+signIn.Header.Get("Set-Auth-Token"))
		require.Equal(t, signIn.Body["token"], obj(t, bySigned.get("/api/auth/get-session").Body["session"])["token"])
		forged := b.client(t, "Cookie", cookie[:len(cookie)-6]+"AAAA%3D")
		require.Equal(t, "null", strings.TrimSpace(forged.get("/api/auth/get-session").Raw))

		out := byCookie.post("/api/auth/sign-out", map[string]any{})
		require.Equal(t, http.StatusOK, out.Status, out.Raw)
		require.Equal(t, true, out.Body["success"])
		require.Contains(t, out.Header.Get("Set-Cookie"), "Max-Age=0")
		require.Equal(t, "null", strings.TrimSpace(byCookie.get("/api/auth/get-session").Raw))
		require.Equal(t, "null", strings.TrimSpace(bySigned.get("/api/auth/get-session").Raw))
		require.Equal(t, http.StatusOK, a.c.get("/api/auth/get-session").Status, "other sessions live on")
		require.NotEqual(t, "null", strings.TrimSpace(a.c.get("/api/auth/get-session").Raw))
		require.Equal(t, http.StatusOK, b.client(t).post("/api/auth/sign-out", nil).Status, "no session: still success")
	})

	t.Run("ChangePassword", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "change")
		other := b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password})
		otherC := b.client(t, "Authorization", "Bearer "+other.Body["token"].(string))

		requireCode(t, b.client(t).post("/api/auth/change-password", map[string]any{"currentPassword": password, "newPassword": "new password"}), 401, "UNAUTHORIZED")
		requireCode(t, a.c.post("/api/auth/change-password", map[string]any{"currentPassword": "not it at all", "newPassword": "new password"}), 401, "INVALID_CREDENTIALS")
		requireCode(t, a.c.post("/api/auth/change-password", map[string]any{"currentPassword": password, "newPassword": "short"}), 400, "PASSWORD_TOO_SHORT")

		r := a.c.post("/api/auth/change-password", map[string]any{"currentPassword": password, "newPassword": "second password"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Nil(t, r.Body["token"])
		require.NotEqual(t, "null", strings.TrimSpace(otherC.get("/api/auth/get-session").Raw))

		r = a.c.post("/api/auth/change-password", map[string]any{"currentPassword": "second password", "newPassword": "third password", "revokeOtherSessions": true})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.NotEmpty(t, r.Body["token"])
		require.True(t, strings.HasPrefix(r.Header.Get("Set-Auth-Token"), r.Body["token"].(string)+"."))
		require.Equal(t, "null", strings.TrimSpace(otherC.get("/api/auth/get-session").Raw))
		fresh := b.client(t, "Authorization", "Bearer "+r.Body["token"].(string))
		require.Equal(t, a.orgID, obj(t, fresh.get("/api/auth/get-session").Body["session"])["activeOrganizationId"])
		requireCode(t, b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password}), 401, "INVALID_CREDENTIALS")
		require.Equal(t, http.StatusOK, b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "third password"}).Status)
	})

	t.Run("PasswordReset", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "reset")
		for _, e := range []string{a.email, email("unknown")} {
			r := b.client(t).post("/api/auth/request-password-reset", map[string]any{"email": e, "redirectTo": "/reset"})
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			require.Equal(t, true, r.Body["status"])
		}
		requireCode(t, b.client(t).post("/api/auth/request-password-reset", map[string]any{"email": a.email, "redirectTo": "https://evil.test/x"}), 400, "VALIDATION_ERROR")
		requireCode(t, b.client(t).post("/api/auth/request-password-reset", map[string]any{"email": a.email, "redirectTo": "//evil.test/x"}), 400, "VALIDATION_ERROR")

		link := regexp.MustCompile(`"to":"` + regexp.QuoteMeta(a.email) + `","link":"(http://localhost:8080/reset\?token=([A-Za-z0-9]{32}))"`).FindStringSubmatch(b.logs.String())
		require.NotNil(t, link, "the dev mailer logs the reset link: %s", b.logs.String())
		token := link[2]
		require.NotContains(t, strings.ReplaceAll(b.logs.String(), link[1], ""), token, "the token appears only in the link")

		requireCode(t, b.client(t).post("/api/auth/reset-password", map[string]any{"token": "not-a-token", "newPassword": "reset password"}), 400, "INVALID_TOKEN")
		requireCode(t, b.client(t).post("/api/auth/reset-password", map[string]any{"token": token, "newPassword": "short"}), 400, "PASSWORD_TOO_SHORT")
		r := b.client(t).post("/api/auth/reset-password", map[string]any{"token": token, "newPassword": "reset password"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, true, r.Body["status"])
		require.Equal(t, "null", strings.TrimSpace(a.c.get("/api/auth/get-session").Raw), "every session is revoked")
		requireCode(t, b.client(t).post("/api/auth/reset-password", map[string]any{"token": token, "newPassword": "again password"}), 400, "INVALID_TOKEN")
		require.Equal(t, http.StatusOK, b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "reset password"}).Status)
	})

	t.Run("Organizations", func(t *testing.T) {
		t.Parallel()
		a, outsider := b.signUp(t, "orgs"), b.signUp(t, "outsider")
		slug := "team-" + strings.ToLower(strings.TrimPrefix(testkit.Name(""), "_"))
		requireCode(t, b.client(t).post("/api/auth/organization/create", map[string]any{"name": "Team", "slug": slug}), 401, "UNAUTHORIZED")
		requireCode(t, a.c.post("/api/auth/organization/create", map[string]any{"name": "Team", "slug": "Not A Slug"}), 400, "VALIDATION_ERROR")
		requireCode(t, a.c.post("/api/auth/organization/create", map[string]any{"name": "Team"}), 400, "VALIDATION_ERROR")

		r := a.c.post("/api/auth/organization/create", map[string]any{"name": "Team", "slug": slug})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		team := r.Body["id"].(string)
		require.Equal(t, slug, r.Body["slug"])
		require.Regexp(t, millis, r.Body["createdAt"])
		members := r.Body["members"].([]any)
		require.Len(t, members, 1)
		require.Equal(t, "owner", obj(t, members[0])["role"])
		require.Equal(t, a.userID, obj(t, members[0])["userId"])
		require.Equal(t, team, obj(t, a.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"])
		requireCode(t, a.c.post("/api/auth/organization/create", map[string]any{"name": "Again", "slug": slug}), 400, "ORGANIZATION_ALREADY_EXISTS")

		list := a.c.get("/api/auth/organization/list")
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		orgs := arr(t, list.Raw)
		require.Len(t, orgs, 2)
		require.Equal(t, a.orgID, obj(t, orgs[0])["id"])
		requireCode(t, b.client(t).get("/api/auth/organization/list"), 401, "UNAUTHORIZED")

		// set-active: null unsets, then by id and by slug; foreign or unknown: 403.
		u := a.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": nil})
		require.Equal(t, http.StatusOK, u.Status, u.Raw)
		require.Equal(t, "null", strings.TrimSpace(u.Raw))
		require.Nil(t, obj(t, a.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"])
		s := a.c.post("/api/auth/organization/set-active", map[string]any{"organizationSlug": slug})
		require.Equal(t, http.StatusOK, s.Status, s.Raw)
		require.Equal(t, team, s.Body["id"])
		s = a.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": a.orgID})
		require.Equal(t, a.orgID, s.Body["id"])
		s = a.c.post("/api/auth/organization/set-active", map[string]any{})
		require.Equal(t, a.orgID, s.Body["id"], "no argument: the current one")
		requireCode(t, outsider.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": team}), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")
		requireCode(t, outsider.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": "org_nope"}), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")
		requireCode(t, outsider.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": 7}), 400, "VALIDATION_ERROR")
		requireCode(t, b.client(t).post("/api/auth/organization/set-active", map[string]any{"organizationId": team}), 401, "UNAUTHORIZED")
	})

	t.Run("MembersAndInvitations", func(t *testing.T) {
		t.Parallel()
		owner, invitee, stranger := b.signUp(t, "owner"), b.signUp(t, "invitee"), b.signUp(t, "stranger")
		requireCode(t, owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": invitee.email, "role": "boss"}), 400, "VALIDATION_ERROR")
		inv := owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": invitee.email, "role": "member"})
		require.Equal(t, http.StatusOK, inv.Status, inv.Raw)
		require.Regexp(t, `^inv_`, inv.Body["id"])
		require.Equal(t, "pending", inv.Body["status"])
		require.Equal(t, invitee.email, inv.Body["email"])
		require.Equal(t, owner.orgID, inv.Body["organizationId"])
		require.Regexp(t, millis, inv.Body["expiresAt"])
		requireCode(t, owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": invitee.email, "role": "member"}), 400, "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION")
		requireCode(t, owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": owner.email, "role": "member"}), 400, "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION")

		requireCode(t, stranger.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]}), 403, "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION")
		requireCode(t, invitee.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": "inv_nope"}), 400, "INVITATION_NOT_FOUND")
		acc := invitee.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]})
		require.Equal(t, http.StatusOK, acc.Status, acc.Raw)
		require.Equal(t, "accepted", obj(t, acc.Body["invitation"])["status"])
		member := obj(t, acc.Body["member"])
		require.Equal(t, "member", member["role"])
		require.Equal(t, invitee.userID, member["userId"])
		require.Equal(t, owner.orgID, obj(t, invitee.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"])

		lm := invitee.c.get("/api/auth/organization/list-members")
		require.Equal(t, http.StatusOK, lm.Status, lm.Raw)
		require.InDelta(t, 2.0, lm.Body["total"], 0)
		first := obj(t, lm.Body["members"].([]any)[0])
		require.Equal(t, owner.email, obj(t, first["user"])["email"])
		requireCode(t, stranger.c.get("/api/auth/organization/list-members?organizationId="+owner.orgID), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")

		// A member manages nothing; the only owner neither leaves nor is removed.
		requireCode(t, invitee.c.post("/api/auth/organization/invite-member", map[string]any{"email": stranger.email, "role": "member"}), 403, "FORBIDDEN")
		requireCode(t, invitee.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": owner.email}), 403, "FORBIDDEN")
		requireCode(t, owner.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": owner.email}), 400, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER")
		requireCode(t, owner.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": "mem_nope"}), 400, "MEMBER_NOT_FOUND")
		requireCode(t, owner.c.post("/api/auth/organization/leave", map[string]any{"organizationId": owner.orgID}), 400, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER")
		requireCode(t, stranger.c.post("/api/auth/organization/leave", map[string]any{"organizationId": owner.orgID}), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")

		rm := owner.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": member["id"]})
		require.Equal(t, http.StatusOK, rm.Status, rm.Raw)
		require.Equal(t, invitee.userID, obj(t, rm.Body["member"])["userId"])
		res := b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + invitee.token})
		require.Equal(t, "no_active_organization", res.GetRejection().GetCode(), "the removed member's session loses the organization at once")

		// Invited again and accepted, then leaving.
		inv = owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": invitee.email, "role": "admin"})
		require.Equal(t, http.StatusOK, inv.Status, inv.Raw)
		require.Equal(t, http.StatusOK, invitee.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]}).Status)
		l := invitee.c.post("/api/auth/organization/leave", map[string]any{"organizationId": owner.orgID})
		require.Equal(t, http.StatusOK, l.Status, l.Raw)
		require.Equal(t, true, l.Body["success"])

		// Without an active organization, the routes that default to it say so.
		u := stranger.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": nil})
		require.Equal(t, http.StatusOK, u.Status)
		requireCode(t, stranger.c.get("/api/auth/organization/list-members"), 400, "NO_ACTIVE_ORGANIZATION")
		requireCode(t, stranger.c.post("/api/auth/api-key/create", map[string]any{"name": "x"}), 400, "NO_ACTIVE_ORGANIZATION")
	})

	t.Run("APIKeys", func(t *testing.T) {
		t.Parallel()
		a, other := b.signUp(t, "keys"), b.signUp(t, "otherkeys")
		requireCode(t, b.client(t).post("/api/auth/api-key/create", map[string]any{"name": "ci"}), 401, "UNAUTHORIZED")
		requireCode(t, a.c.post("/api/auth/api-key/create", map[string]any{"name": "ci", "expiresIn": 0.5}), 400, "VALIDATION_ERROR")
		requireCode(t, a.c.post("/api/auth/api-key/create", map[string]any{"name": "ci", "prefix": "abc_"}), 400, "VALIDATION_ERROR")

		r := a.c.post("/api/auth/api-key/create", map[string]any{"name": "ci", "expiresIn": nil})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		raw := r.Body["key"].(string)
		require.Regexp(t, `^svc_[A-Za-z]{64}$`, raw)
		require.Equal(t, raw[:6], r.Body["start"])
		require.Equal(t, "svc_", r.Body["prefix"])
		require.Equal(t, a.orgID, r.Body["referenceId"])
		require.Equal(t, "ci", r.Body["name"])
		require.Equal(t, true, r.Body["enabled"])
		require.Nil(t, r.Body["lastRequest"])
		require.Nil(t, r.Body["expiresAt"])
		require.Regexp(t, millis, r.Body["createdAt"])
		id := r.Body["id"].(string)
		require.Regexp(t, `^key_`, id)

		withExpiry := a.c.post("/api/auth/api-key/create", map[string]any{"expiresIn": 3600})
		require.Equal(t, http.StatusOK, withExpiry.Status, withExpiry.Raw)
		require.Regexp(t, millis, withExpiry.Body["expiresAt"])
		require.Nil(t, withExpiry.Body["name"])

		list := a.c.get("/api/auth/api-key/list")
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		require.NotContains(t, list.Raw, raw[6:])
		require.InDelta(t, 2.0, list.Body["total"], 0)
		require.NotContains(t, obj(t, list.Body["apiKeys"].([]any)[0]), "key")
		require.Equal(t, id, obj(t, list.Body["apiKeys"].([]any)[0])["id"], "oldest first")

		// Keys never manage keys, presented either way; other organizations see nothing.
		byHeader, byBearer := b.client(t, "X-Api-Key", raw), b.client(t, "Authorization", "Bearer "+raw)
		for _, c := range []*client{byHeader, byBearer, a.c.with("X-Api-Key", raw)} {
			requireCode(t, c.post("/api/auth/api-key/create", map[string]any{"name": "child"}), 401, "INVALID_REFERENCE_ID_FROM_API_KEY")
			requireCode(t, c.get("/api/auth/api-key/list"), 401, "INVALID_REFERENCE_ID_FROM_API_KEY")
			requireCode(t, c.do(http.MethodDelete, "/api/auth/api-key/"+id, nil), 401, "INVALID_REFERENCE_ID_FROM_API_KEY")
			requireCode(t, c.post("/api/auth/api-key/delete", map[string]any{"keyId": id}), 401, "INVALID_REFERENCE_ID_FROM_API_KEY")
		}
		require.NotContains(t, other.c.get("/api/auth/api-key/list").Raw, id)
		requireCode(t, other.c.do(http.MethodDelete, "/api/auth/api-key/"+id, nil), 404, "KEY_NOT_FOUND")
		requireCode(t, other.c.get("/api/auth/api-key/list?organizationId="+a.orgID), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")

		// Verify, and lastRequest catches up within a few seconds, without a write per request.
		v := b.client(t).post("/api/auth/api-key/verify", map[string]any{"key": raw})
		require.Equal(t, http.StatusOK, v.Status, v.Raw)
		require.Equal(t, true, v.Body["valid"])
		require.Nil(t, v.Body["error"])
		require.NotContains(t, obj(t, v.Body["key"]), "key")
		require.Equal(t, id, obj(t, v.Body["key"])["id"])
		requireCode(t, b.client(t).post("/api/auth/api-key/verify", map[string]any{"key": "svc_" + strings.Repeat("x", 64)}), 401, "INVALID_TOKEN")
		requireCode(t, b.client(t).post("/api/auth/api-key/verify", map[string]any{}), 400, "VALIDATION_ERROR")
		require.Eventually(t, func() bool {
			l := a.c.get("/api/auth/api-key/list")
			k := obj(t, l.Body["apiKeys"].([]any)[0])
			return k["lastRequest"] != nil
		}, 10*time.Second, 100*time.Millisecond)

		// Revoke by both routes; each is effective on the very next request.
		d := a.c.do(http.MethodDelete, "/api/auth/api-key/"+id, nil)
		require.Equal(t, http.StatusOK, d.Status, d.Raw)
		require.Equal(t, true, d.Body["success"])
		requireCode(t, b.client(t).post("/api/auth/api-key/verify", map[string]any{"key": raw}), 401, "INVALID_TOKEN")
		requireCode(t, a.c.do(http.MethodDelete, "/api/auth/api-key/"+id, nil), 404, "KEY_NOT_FOUND")
		second := withExpiry.Body["id"].(string)
		requireCode(t, a.c.post("/api/auth/api-key/delete", map[string]any{}), 400, "VALIDATION_ERROR")
		d = a.c.post("/api/auth/api-key/delete", map[string]any{"keyId": second})
		require.Equal(t, http.StatusOK, d.Status, d.Raw)
		requireCode(t, a.c.post("/api/auth/api-key/delete", map[string]any{"keyId": second}), 404, "KEY_NOT_FOUND")
		require.InDelta(t, 0.0, a.c.get("/api/auth/api-key/list").Body["total"], 0)
	})

	t.Run("MembersCannotManageKeys", func(t *testing.T) {
		t.Parallel()
		owner, member := b.signUp(t, "keyowner"), b.signUp(t, "keymember")
		k := owner.c.post("/api/auth/api-key/create", map[string]any{"name": "ci"})
		require.Equal(t, http.StatusOK, k.Status, k.Raw)
		inv := owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": member.email, "role": "member"})
		require.Equal(t, http.StatusOK, member.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]}).Status)
		requireCode(t, member.c.post("/api/auth/api-key/create", map[string]any{"name": "x"}), 403, "FORBIDDEN")
		requireCode(t, member.c.get("/api/auth/api-key/list"), 403, "FORBIDDEN")
		requireCode(t, member.c.do(http.MethodDelete, "/api/auth/api-key/"+k.Body["id"].(string), nil), 403, "FORBIDDEN")
	})

	t.Run("NoRouteAndWrongMethod", func(t *testing.T) {
		t.Parallel()
		requireError(t, b.client(t).get("/api/auth/nope"), http.StatusNotFound, "not_found")
		requireError(t, b.client(t).get("/api/auth/sign-out"), http.StatusMethodNotAllowed, "method_not_allowed")
		requireError(t, b.client(t).get("/api/bootstrap"), http.StatusNotFound, "not_found")
		requireError(t, b.client(t).post("/api/bootstrap", map[string]any{"email": email("b"), "password": password}), http.StatusNotFound, "not_found")
	})

	t.Run("BodyOverOneMiB", func(t *testing.T) {
		t.Parallel()
		big := `{"email":"` + strings.Repeat("x", 1<<20) + `"}`
		r := b.client(t).post("/api/auth/sign-up/email", big)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
		require.Equal(t, "payload_too_large", r.Body["error"])
	})
}

func TestResolve(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.signUp(t, "resolve")
	signIn := b.client(t).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password})
	signed := signIn.Header.Get("Set-Auth-Token")
	cookie := strings.SplitN(signIn.Header.Get("Set-Cookie"), ";", 2)[0]
	k := a.c.post("/api/auth/api-key/create", map[string]any{"name": "ci"})
	raw, keyID := k.Body["key"].(string), k.Body["id"].(string)

	session := func(t *testing.T, res *identityv1.ResolveResponse) {
		t.Helper()
		id := res.GetIdentity()
		require.NotNil(t, id, "%v", res)
		require.Equal(t, identityv1.AuthMode_AUTH_MODE_SESSION, id.GetAuthMode())
		require.Equal(t, a.userID, id.GetUser().GetId())
		require.Equal(t, a.email, id.GetUser().GetEmail())
		require.Equal(t, a.orgID, id.GetOrganizationId())
		require.Empty(t, id.GetApiKeyId())
	}
	key := func(t *testing.T, res *identityv1.ResolveResponse) {
		t.Helper()
		id := res.GetIdentity()
		require.NotNil(t, id, "%v", res)
		require.Equal(t, identityv1.AuthMode_AUTH_MODE_API_KEY, id.GetAuthMode())
		require.Equal(t, keyID, id.GetApiKeyId())
		require.Equal(t, a.orgID, id.GetOrganizationId())
		require.Equal(t, a.userID, id.GetUser().GetId(), "the key's creator")
	}
	rejected := func(t *testing.T, res *identityv1.ResolveResponse, code string) {
		t.Helper()
		require.Nil(t, res.GetIdentity())
		require.Equal(t, code, res.GetRejection().GetCode())
		require.NotEmpty(t, res.GetRejection().GetMessage())
	}

	session(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + a.token}))
	session(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + signed}))
	session(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + url.QueryEscape(signed)}))
	session(t, b.resolve(t, &identityv1.ResolveRequest{Cookie: "a=b; " + cookie}))
	key(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + raw}))
	key(t, b.resolve(t, &identityv1.ResolveRequest{ApiKey: raw}))
	key(t, b.resolve(t, &identityv1.ResolveRequest{Cookie: "svc.session_token=forged", ApiKey: raw}))
	session(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + a.token, ApiKey: raw}))

	for _, req := range []*identityv1.ResolveRequest{
		{},
		{Authorization: "Bearer not-a-session"},
		{Authorization: "Bearer " + strings.Repeat("A", 32)},
		{Authorization: "Basic " + a.token},
		{Cookie: "svc.session_token=" + a.token},
		{ApiKey: "svc_notakey"},
		{ApiKey: "svc_" + strings.Repeat("Q", 64)},
	} {
		rejected(t, b.resolve(t, req), "unauthorized")
	}

	// No active organization, then back.
	require.Equal(t, http.StatusOK, a.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": nil}).Status)
	rejected(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + a.token}), "no_active_organization")
	key(t, b.resolve(t, &identityv1.ResolveRequest{ApiKey: raw}))
	require.Equal(t, http.StatusOK, a.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": a.orgID}).Status)
	session(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + a.token}))

	// Sign-out and revocation fail the very next resolution.
	require.Equal(t, http.StatusOK, b.client(t, "Cookie", cookie).post("/api/auth/sign-out", map[string]any{}).Status)
	rejected(t, b.resolve(t, &identityv1.ResolveRequest{Cookie: cookie}), "unauthorized")
	rejected(t, b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + signed}), "unauthorized")
	require.Equal(t, http.StatusOK, a.c.do(http.MethodDelete, "/api/auth/api-key/"+keyID, nil).Status)
	rejected(t, b.resolve(t, &identityv1.ResolveRequest{ApiKey: raw}), "unauthorized")

	// Unsigned callers are refused before Resolve runs.
	res, err := http.Post(b.srv.URL+"/identity.v1.IdentityService/Resolve", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

func TestBootstrap(t *testing.T) {
	t.Parallel()

	t.Run("ClosedWithoutTheFlag", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			requireError(t, b.client(t).do(m, "/api/bootstrap", nil), http.StatusNotFound, "not_found")
		}
		// Closed says nothing else, whatever the Origin.
		requireError(t, b.client(t).with("Origin", "").post("/api/bootstrap", "text"), http.StatusNotFound, "not_found")
	})

	t.Run("OpensOnceWithTheFlagOnAnEmptyStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]string{"SVC_BOOTSTRAP": "1"})
		anon := b.client(t) // with a trusted Origin, as every mutation needs
		requireError(t, anon.get("/api/bootstrap"), http.StatusNotFound, "not_found")
		r := anon.post("/api/bootstrap", map[string]any{"email": "root@x.io"})
		requireError(t, r, http.StatusBadRequest, "invalid_body")
		r = anon.post("/api/bootstrap", map[string]any{"email": "root@x.io", "password": "short"})
		requireError(t, r, http.StatusBadRequest, "invalid_body")
		require.Equal(t, "/password", obj(t, r.Body["issues"].([]any)[0])["path"])

		r = anon.post("/api/bootstrap", map[string]any{"email": "Root@x.io", "password": password, "name": "Root", "organizationName": "Acme"})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		require.Equal(t, "root@x.io", obj(t, r.Body["user"])["email"])
		o := obj(t, r.Body["organization"])
		require.Equal(t, "Acme", o["name"])
		require.Regexp(t, `^personal-[a-z0-9]{8}$`, o["slug"])
		key := obj(t, r.Body["apiKey"])
		require.Regexp(t, `^svc_[A-Za-z]{64}$`, key["key"])
		require.Equal(t, key["key"].(string)[:6], key["start"])
		require.NotEmpty(t, r.Header.Get("Set-Auth-Token"))

		res := b.resolve(t, &identityv1.ResolveRequest{ApiKey: key["key"].(string)})
		require.Equal(t, o["id"], res.GetIdentity().GetOrganizationId())
		res = b.resolve(t, &identityv1.ResolveRequest{Authorization: "Bearer " + r.Body["token"].(string)})
		require.Equal(t, o["id"], res.GetIdentity().GetOrganizationId())

		requireError(t, anon.post("/api/bootstrap", map[string]any{"email": "two@x.io", "password": password}), http.StatusNotFound, "not_found")
	})
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{"SVC_INTERNAL_SECRET": secret}
	load := func(extra map[string]string) (service.Config, error) {
		vars := map[string]string{}
		for k, v := range base {
			vars[k] = v
		}
		for k, v := range extra {
			vars[k] = v
		}
		return service.LoadConfig(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	}

	cfg, err := load(nil)
	require.NoError(t, err)
	require.Equal(t, "http://localhost:8080", cfg.PublicURL.String())
	require.True(t, cfg.Origins["http://localhost:8080"])
	require.Equal(t, service.DeriveAuthSecret(secret), cfg.AuthSecret)
	require.NotEqual(t, []byte(secret), cfg.AuthSecret)
	require.False(t, cfg.Bootstrap)
	require.Equal(t, service.MailNone, cfg.Mail, "reset links are never logged unless asked for")
	require.Positive(t, cfg.HashSlots)
	require.Equal(t, service.DefaultHashWait, cfg.HashWait)
	require.Equal(t, port.Ceilings{OrganizationsPerUser: 20, KeysPerOrganization: 100, KeysPerUser: 200}, cfg.Ceilings)

	cfg, err = load(map[string]string{"SVC_PUBLIC_URL": "https://api.example.com:443/base", "SVC_TRUSTED_ORIGINS": "https://app.example.com, http://LOCALHOST:3000",
		"SVC_AUTH_SECRET": strings.Repeat("a", 32), "SVC_BOOTSTRAP": "1",
		"SVC_MAX_ORGANIZATIONS_PER_USER": "1", "SVC_MAX_API_KEYS_PER_ORG": "7", "SVC_MAX_API_KEYS_PER_USER": "100000"})
	require.NoError(t, err)
	for _, o := range []string{"https://api.example.com", "https://app.example.com", "http://localhost:3000"} {
		require.True(t, cfg.Origins[o], o)
	}
	require.Equal(t, []byte(strings.Repeat("a", 32)), cfg.AuthSecret)
	require.True(t, cfg.Bootstrap)
	require.Equal(t, port.Ceilings{OrganizationsPerUser: 1, KeysPerOrganization: 7, KeysPerUser: 100_000}, cfg.Ceilings)

	for name, extra := range map[string]map[string]string{
		"ShortAuthSecret": {"SVC_AUTH_SECRET": "short"},
		"BadOrigin":       {"SVC_TRUSTED_ORIGINS": "ftp://x"},
		"BadPublicURL":    {"SVC_PUBLIC_URL": "localhost"},
		"BadBootstrap":    {"SVC_BOOTSTRAP": "yes"},
		"BadMail":         {"SVC_MAIL": "smtp"},
		"NoOrganizations": {"SVC_MAX_ORGANIZATIONS_PER_USER": "0"},
		"NoKeys":          {"SVC_MAX_API_KEYS_PER_ORG": "-1"},
		"KeysTypo":        {"SVC_MAX_API_KEYS_PER_USER": "1000000"},
		"KeysNotANumber":  {"SVC_MAX_API_KEYS_PER_USER": "many"},
	} {
		_, err := load(extra)
		require.Error(t, err, name)
	}
}
