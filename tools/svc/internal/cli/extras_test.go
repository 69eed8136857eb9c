package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/clients/apiclient"
	"svc.dev/tools/svc/internal/cli"
	"svc.dev/tools/svc/internal/credential"
)

// fakeAPI answers the routes a test scripts ("METHOD /path" → handler) and records every
// request; anything unscripted is a 404 and fails the test.
type fakeAPI struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	calls  []string
	bodies map[string]string
	heads  map[string]http.Header
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, routes: map[string]http.HandlerFunc{}, bodies: map[string]string{}, heads: map[string]http.Header{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls = append(f.calls, key)
		f.bodies[key] = string(body)
		f.heads[key] = r.Header.Clone()
		h, ok := f.routes[key]
		f.mu.Unlock()
		if !ok {
			t.Errorf("unexpected request %s", key)
			http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) on(route string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[route] = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func (f *fakeAPI) called(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == route {
			n++
		}
	}
	return n
}

func (f *fakeAPI) header(route, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heads[route].Get(name)
}

// runAgainst runs svc against the fake API with the bundle's credentials file, as a pipe
// (JSON output) unless the args say otherwise.
func (b *testBundle) runAgainst(t *testing.T, f *fakeAPI, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"SVC_CREDENTIALS": b.creds, "SVC_API": f.srv.URL}
	code := cli.Run(context.Background(), cli.Env{
		Stdin: strings.NewReader(b.stdin), Stdout: &stdout, Stderr: &stderr,
		Getenv:     func(k string) string { return env[k] },
		HomeDir:    func() (string, error) { return "", errors.New("no home in tests") },
		Hostname:   func() (string, error) { return "test-host", nil },
		Now:        func() time.Time { return time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC) },
		Sleep:      apiclient.Sleep,
		HTTPClient: f.srv.Client(),
		Version:    "v1.2.3-test",
	}, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestConnectorsCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	s := b.login(t, f.srv.URL, 0)
	f.on("GET /api/connectors", 200, `{"connectors":[
		{"type":"log","category":"action","title":"Log","params":{"type":"object","required":["message"],"properties":{"message":{"type":"string"}}}},
		{"type":"http.request","category":"action","title":"HTTP request","params":{"type":"object","required":["method","url"],"properties":{"method":{},"url":{},"timeout_ms":{},"body":{}}}},
		{"type":"trigger.manual","category":"trigger","title":"Manual","params":{"type":"object","properties":{}}}]}`)

	r := b.runAgainst(t, f, "connectors")
	require.Equal(t, 0, r.code, r)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 3)
	require.Equal(t, "http.request", list[1]["type"])
	require.Contains(t, list[1], "params", "JSON is the catalog as sent")
	require.Equal(t, "Bearer "+s.APIKey, f.header("GET /api/connectors", "Authorization"))

	r = b.runAgainst(t, f, "connectors", "-o", "table")
	require.Equal(t, 0, r.code, r)
	require.Regexp(t, `TYPE\s+CATEGORY\s+TITLE\s+PARAMS\n`, r.stdout)
	require.Regexp(t, `http\.request\s+action\s+HTTP request\s+method\*, url\*, body, timeout_ms\n`, r.stdout)
	require.Regexp(t, `trigger\.manual\s+trigger\s+Manual\s+-\n`, r.stdout)

	f.on("GET /api/connectors", 401, `{"error":"unauthorized","message":"bad key"}`)
	r = b.runAgainst(t, f, "connectors")
	require.Equal(t, 1, r.code, r)
	require.Contains(t, r.stderr, "unauthorized: bad key (HTTP 401)")
}

func TestWorkflowsDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	s := b.login(t, f.srv.URL, 0)
	f.on("DELETE /api/workflows/wf_1", 204, "")
	r := b.runAgainst(t, f, "workflows", "delete", "wf_1")
	require.Equal(t, result{stdout: "{\n  \"deleted\": true,\n  \"id\": \"wf_1\"\n}\n"}, r)
	require.Equal(t, "Bearer "+s.APIKey, f.header("DELETE /api/workflows/wf_1", "Authorization"))
	r = b.runAgainst(t, f, "workflows", "rm", "wf_1", "-o", "table")
	require.Equal(t, result{stdout: "Deleted workflow wf_1.\n"}, r)

	f.on("DELETE /api/workflows/wf_2", 404, `{"error":"not_found","message":"workflow not found"}`)
	r = b.runAgainst(t, f, "workflows", "delete", "wf_2")
	require.Equal(t, 1, r.code, r)
	require.Contains(t, r.stderr, "not_found: workflow not found (HTTP 404)")
	require.Empty(t, r.stdout)

	r = b.runAgainst(t, f, "workflows", "delete")
	require.Equal(t, 2, r.code, r)
	require.Contains(t, r.stderr, "missing argument <workflow-id>")
}

const skippedPatch = `{"ok":true,"version":2,"validation_errors":[],"skipped_items":[{"operation_index":1,"operation_type":"add","block_id":"x","reason_code":"block_type_not_registered","reason":"no such type","hint":{"did_you_mean":"log"}}]}`

func TestWorkflowsCreateFromOps(t *testing.T) {
	t.Parallel()
	ops := `{"ops":[{"operation_type":"add","block_id":"start","type":"trigger.manual"},{"operation_type":"add","block_id":"x","type":"lgo"}]}`
	created := `{"id":"wf_1","name":"hello","version":1,"definition":{"blocks":[],"edges":[]},"validation_errors":[],"skipped_items":[]}`
	after := `{"id":"wf_1","name":"hello","version":2,"definition":{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}}],"edges":[]},"validation_errors":[]}`

	t.Run("SkippedExitsOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		b.login(t, f.srv.URL, 0)
		f.on("POST /api/workflows", 201, created)
		f.on("POST /api/workflows/wf_1/operations", 200, skippedPatch)
		f.on("GET /api/workflows/wf_1", 200, after)
		b.stdin = ops
		r := b.runAgainst(t, f, "workflows", "create", "--name", "hello", "-f", "-")
		require.Equal(t, 1, r.code, r)
		// What was created is printed all the same: the workflow and the skipped items.
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		require.Equal(t, "wf_1", out["id"])
		require.EqualValues(t, 2, out["version"])
		require.Len(t, out["skipped_items"], 1)
		require.Contains(t, r.stderr, "workflow wf_1 was created, but 1 operation(s) of - were skipped")
		// The create carried no definition; the ops went as they were, guarded by If-Match.
		require.JSONEq(t, `{"name":"hello"}`, f.bodies["POST /api/workflows"])
		require.JSONEq(t, ops, f.bodies["POST /api/workflows/wf_1/operations"])
		require.Equal(t, "1", f.header("POST /api/workflows/wf_1/operations", "If-Match"))

		r = b.runAgainst(t, f, "workflows", "create", "--name", "hello", "-f", "-", "-o", "table")
		require.Equal(t, 1, r.code, r)
		require.Contains(t, r.stdout, "Created workflow wf_1 (\"hello\"), version 2.")
		require.Contains(t, r.stdout, "#1 add x: block_type_not_registered — no such type")
		require.Contains(t, r.stdout, `hint: did you mean log?`)
	})

	t.Run("NothingSkippedExitsZero", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		b.login(t, f.srv.URL, 0)
		f.on("POST /api/workflows", 201, created)
		f.on("POST /api/workflows/wf_1/operations", 200, `{"ok":true,"version":2,"validation_errors":[],"skipped_items":[]}`)
		f.on("GET /api/workflows/wf_1", 200, after)
		b.stdin = `[{"operation_type":"add","block_id":"start","type":"trigger.manual"}]`
		r := b.runAgainst(t, f, "workflows", "create", "--name", "hello", "-f", "-")
		require.Equal(t, 0, r.code, r)
		require.Empty(t, r.stderr)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Equal(t, []any{}, out["skipped_items"])
	})

	t.Run("DefinitionWithSkippedExitsOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		b.login(t, f.srv.URL, 0)
		f.on("POST /api/workflows", 201, `{"id":"wf_9","name":"d","version":1,"validation_errors":[],"skipped_items":[{"operation_index":0,"operation_type":"add","block_id":"a","reason_code":"unknown_param","reason":"no param z"}]}`)
		b.stdin = `{"blocks":[{"block_id":"a","type":"log","params":{"z":1}}],"edges":[]}`
		r := b.runAgainst(t, f, "workflows", "create", "--name", "d", "-f", "-")
		require.Equal(t, 1, r.code, r)
		require.Contains(t, r.stdout, `"wf_9"`)
		require.Contains(t, r.stderr, "workflow wf_9 was created, but 1 operation(s)")
		require.Zero(t, f.called("POST /api/workflows/wf_9/operations"), "a definition is sent with the create")
	})

	t.Run("RefusedBatchLeavesNoWorkflow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		b.login(t, f.srv.URL, 0)
		f.on("POST /api/workflows", 201, created)
		f.on("POST /api/workflows/wf_1/operations", 400, `{"error":"invalid_body","message":"ops: too many","issues":[{"path":"/ops","message":"at most 500"}]}`)
		f.on("DELETE /api/workflows/wf_1", 204, "")
		b.stdin = `{"ops":[]}`
		r := b.runAgainst(t, f, "workflows", "create", "--name", "hello", "-f", "-")
		require.Equal(t, 1, r.code, r)
		require.Contains(t, r.stderr, "invalid_body: ops: too many (HTTP 400)")
		require.Contains(t, r.stderr, "/ops: at most 500")
		require.Equal(t, 1, f.called("DELETE /api/workflows/wf_1"))
		require.Empty(t, r.stdout)
	})
}

func TestRunRefusedPrintsValidationErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFakeAPI(t)
	b.login(t, f.srv.URL, 0)
	f.on("POST /api/workflows/wf_1/run", 400, `{"error":"workflow_invalid","message":"the workflow has validation errors; fix them before running it",
		"validation_errors":[{"code":"no_trigger","message":"no trigger block","did_you_mean":"trigger.manual"},
		{"code":"missing_required_param","block_id":"say","message":"log needs message","pointer":"/params/message"}]}`)
	for _, extra := range [][]string{nil, {"--follow"}, {"-o", "table"}} {
		r := b.runAgainst(t, f, append([]string{"run", "wf_1"}, extra...)...)
		require.Equal(t, 1, r.code, r)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "svc: workflow_invalid: the workflow has validation errors; fix them before running it (HTTP 400)\n")
		require.Contains(t, r.stderr, "  no_trigger: no trigger block\n     hint: did you mean \"trigger.manual\"?\n")
		require.Contains(t, r.stderr, "  missing_required_param [say]: log needs message\n     hint: at /params/message\n")
		require.Contains(t, r.stderr, "svc ops apply wf_1 -f ops.json")
	}
	// Other refusals are printed as before.
	f.on("POST /api/workflows/wf_2/run", 404, `{"error":"not_found","message":"workflow not found"}`)
	r := b.runAgainst(t, f, "run", "wf_2")
	require.Equal(t, 1, r.code, r)
	require.Equal(t, "svc: not_found: workflow not found (HTTP 404)\n", r.stderr)
}

// authFake scripts the auth layer for a sign-in of user usr_a whose active organization is
// org_x (the organization the bundle's saved entries name).
func authFake(t *testing.T) *fakeAPI {
	t.Helper()
	f := newFakeAPI(t)
	f.routes["POST /api/auth/sign-in/email"] = func(w http.ResponseWriter, _ *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "svc.session_token", Value: "fresh.sig", Path: "/"})
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"redirect":false,"token":"fresh","user":{"id":"usr_a","email":"usera@example.com","name":"a"}}`)
	}
	f.on("GET /api/auth/get-session", 200, `{"session":{"id":"ses_1","userId":"usr_a","activeOrganizationId":"org_x"},"user":{"id":"usr_a","email":"usera@example.com"}}`)
	f.on("GET /api/auth/organization/list", 200, `[{"id":"org_x","name":"Personal","slug":"personal-abcdefga"},{"id":"org_y","name":"Acme","slug":"acme"}]`)
	f.on("POST /api/auth/organization/set-active", 200, `{"id":"org_y","name":"Acme","slug":"acme"}`)
	f.on("POST /api/auth/api-key/create", 200, `{"id":"key_new","name":"test-host","start":"svc_Ne","key":"svc_NEWKEY","referenceId":"org_x"}`)
	f.on("GET /api/auth/api-key/list", 200, `{"apiKeys":[{"id":"key_1","name":"laptop","start":"svc_KE","createdAt":"2026-11-22T06:00:00.000Z"}],"total":1}`)
	return f
}

func TestLoginReusesTheSavedKeyWhileItWorks(t *testing.T) {
	t.Parallel()
	login := []string{"login", "--email", "usera@example.com", "--password", "pw", "--non-interactive"}

	t.Run("Works", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := authFake(t)
		saved := b.login(t, f.srv.URL, 0)
		f.on("GET /api/workflows", 200, `{"items":[],"nextCursor":null}`)
		r := b.runAgainst(t, f, login...)
		require.Equal(t, 0, r.code, r)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		require.Equal(t, true, out["apiKeyReused"])
		require.Equal(t, "key_1", out["apiKeyId"])
		require.Equal(t, "laptop", out["apiKeyName"])
		require.Zero(t, f.called("POST /api/auth/api-key/create"), "no key minted")
		require.Equal(t, "Bearer "+saved.APIKey, f.header("GET /api/workflows", "Authorization"), "the check uses the saved key")
		got, ok, err := credential.NewStore(b.creds).Get(f.srv.URL)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, saved.APIKey, got.APIKey)
		require.Equal(t, "svc.session_token=fresh.sig", got.SessionCookie, "the session is the new one")

		r = b.runAgainst(t, f, append(login, "-o", "table")...)
		require.Equal(t, 0, r.code, r)
		require.Contains(t, r.stdout, `API key key_1 ("laptop") still works`)
	})

	for _, tc := range []struct {
		name    string
		prepare func(b *testBundle, f *fakeAPI)
	}{
		{"Revoked", func(_ *testBundle, f *fakeAPI) {
			f.on("GET /api/workflows", 401, `{"error":"unauthorized"}`)
		}},
		{"AnotherOrganization", func(_ *testBundle, f *fakeAPI) {
			f.on("GET /api/workflows", 200, `{"items":[],"nextCursor":null}`)
		}},
		{"AnotherUser", func(b *testBundle, f *fakeAPI) {
			f.on("GET /api/workflows", 200, `{"items":[],"nextCursor":null}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			f := authFake(t)
			args := login
			switch tc.name {
			case "AnotherOrganization":
				b.login(t, f.srv.URL, 0)
				args = append(append([]string{}, login...), "--org-name", "Acme")
			case "AnotherUser":
				b.login(t, f.srv.URL, 1) // usr_b's entry
			default:
				b.login(t, f.srv.URL, 0)
			}
			tc.prepare(b, f)
			r := b.runAgainst(t, f, args...)
			require.Equal(t, 0, r.code, r)
			var out map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
			require.Equal(t, false, out["apiKeyReused"])
			require.Equal(t, "key_new", out["apiKeyId"])
			require.Equal(t, 1, f.called("POST /api/auth/api-key/create"))
			got, _, err := credential.NewStore(b.creds).Get(f.srv.URL)
			require.NoError(t, err)
			require.Equal(t, "svc_NEWKEY", got.APIKey)
			if tc.name != "Revoked" {
				require.Zero(t, f.called("GET /api/workflows"), "a key of another user or organization is not even tried")
			}
		})
	}
}

func TestLogoutRevoke(t *testing.T) {
	t.Parallel()

	t.Run("RevokesAndSignsOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		s := b.login(t, f.srv.URL, 0)
		f.on("DELETE /api/auth/api-key/key_1", 200, `{"success":true}`)
		f.on("POST /api/auth/sign-out", 200, `{"success":true}`)
		r := b.runAgainst(t, f, "logout", "--revoke")
		require.Equal(t, 0, r.code, r)
		require.JSONEq(t, `{"api":"`+f.srv.URL+`","removed":true,"revokedApiKeyId":"key_1"}`, r.stdout)
		require.Equal(t, s.SessionCookie, f.header("DELETE /api/auth/api-key/key_1", "Cookie"), "keys are managed with the session")
		require.Empty(t, f.header("DELETE /api/auth/api-key/key_1", "Authorization"))
		require.Equal(t, s.SessionCookie, f.header("POST /api/auth/sign-out", "Cookie"))
		_, ok, err := credential.NewStore(b.creds).Get(f.srv.URL)
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("AlreadyGoneCountsAsRevoked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		b.login(t, f.srv.URL, 0)
		f.on("DELETE /api/auth/api-key/key_1", 404, `{"code":"KEY_NOT_FOUND","message":"no key"}`)
		f.on("POST /api/auth/sign-out", 200, `{"success":true}`)
		r := b.runAgainst(t, f, "logout", "--revoke", "-o", "table")
		require.Equal(t, 0, r.code, r)
		require.Contains(t, r.stdout, "API key key_1 revoked and the session ended")
	})

	t.Run("ExpiredSessionKeepsTheEntry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		s := b.login(t, f.srv.URL, 0)
		f.on("DELETE /api/auth/api-key/key_1", 401, `{"code":"UNAUTHORIZED","message":"no session"}`)
		r := b.runAgainst(t, f, "logout", "--revoke")
		require.Equal(t, 1, r.code, r)
		require.Contains(t, r.stderr, "the saved session has expired or was revoked")
		require.Contains(t, r.stderr, "Nothing was removed.")
		require.Zero(t, f.called("POST /api/auth/sign-out"))
		got, ok, err := credential.NewStore(b.creds).Get(f.srv.URL)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, s, got)
	})

	t.Run("NotLoggedInIsNothingToDo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newFakeAPI(t)
		r := b.runAgainst(t, f, "logout", "--revoke")
		require.Equal(t, 0, r.code, r)
		require.JSONEq(t, `{"api":"`+f.srv.URL+`","removed":false,"revokedApiKeyId":""}`, r.stdout)
	})
}
