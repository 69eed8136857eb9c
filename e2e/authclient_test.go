package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// testOrigin is trusted by every system these tests start (SVC_TRUSTED_ORIGINS).
const testOrigin = "http://client.test"

func startIdentitySystem(t *testing.T, extra map[string]string) *harness.System {
	t.Helper()
	// SVC_MAIL=log: the password-reset tests read the link from identity's log.
	env := map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin, "SVC_MAIL": "log"}
	for k, v := range extra {
		env[k] = v
	}
	return harness.Start(t, harness.Options{Env: env})
}

// client speaks to the system as one caller: a session token, an API key, or nothing.
type client struct {
	t       *testing.T
	base    string
	origin  string
	token   string // sent as Authorization: Bearer
	apiKey  string // sent as x-api-key
	cookie  string // sent as Cookie
	headers map[string]string
}

func newClient(t *testing.T, sys *harness.System) *client {
	return &client{t: t, base: sys.BaseURL, origin: testOrigin}
}

func (c *client) with(mut func(*client)) *client {
	cp := *c
	mut(&cp)
	return &cp
}

func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	hdr := []string{}
	if body != nil {
		hdr = append(hdr, "Content-Type", "application/json")
	}
	if c.origin != "" {
		hdr = append(hdr, "Origin", c.origin)
	}
	if c.token != "" {
		hdr = append(hdr, "Authorization", "Bearer "+c.token)
	}
	if c.apiKey != "" {
		hdr = append(hdr, "X-Api-Key", c.apiKey)
	}
	if c.cookie != "" {
		hdr = append(hdr, "Cookie", c.cookie)
	}
	for k, v := range c.headers {
		hdr = append(hdr, k, v)
	}
	return call(c.t, method, c.base+path, rd, hdr...)
}

func (c *client) post(path string, body any) response { c.t.Helper(); return c.do("POST", path, body) }
func (c *client) get(path string) response            { c.t.Helper(); return c.do("GET", path, nil) }

var emailSeq atomic.Int64 //nolint:gochecknoglobals // test infrastructure

func uniqueEmail(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s@example.com", prefix, emailSeq.Add(1), hex.EncodeToString(b[:]))
}

// account is a signed-up user with a session.
type account struct {
	email, password string
	userID          string
	token           string
	c               *client
}

func signUp(t *testing.T, sys *harness.System, prefix string) account {
	t.Helper()
	a := account{email: uniqueEmail(prefix), password: "correct horse battery"}
	r := newClient(t, sys).post("/api/auth/sign-up/email", map[string]any{"email": a.email, "password": a.password, "name": prefix})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	a.token, _ = r.Body["token"].(string)
	require.NotEmpty(t, a.token, r.Raw)
	// Like better-auth's bearer plugin, the header carries the signed cookie value.
	require.True(t, strings.HasPrefix(r.Header.Get("Set-Auth-Token"), a.token+"."), r.Header.Get("Set-Auth-Token"))
	user, _ := r.Body["user"].(map[string]any)
	a.userID, _ = user["id"].(string)
	require.Regexp(t, `^usr_`, a.userID)
	a.c = newClient(t, sys).with(func(c *client) { c.token = a.token })
	return a
}

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "want an object, got %T: %v", v, v)
	return m
}

func arr(t *testing.T, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	require.True(t, ok, "want an array, got %T: %v", v, v)
	return a
}

// requireCode checks an auth-layer error {code, message}.
func requireCode(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, r.Raw)
	require.Equal(t, code, r.Body["code"], r.Raw)
	require.NotEmpty(t, r.Body["message"], r.Raw)
}

// requireError checks a service error {error, ...}.
func requireError(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, r.Raw)
	require.Equal(t, code, r.Body["error"], r.Raw)
}

// guardedStatus calls a guarded route that no service serves yet: a caller the guard accepts
// gets 404 not_found; one it refuses gets 401 with the refusal's code.
func guardedProbe(c *client) response { c.t.Helper(); return c.get("/api/runs/run_probe") }
