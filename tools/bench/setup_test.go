package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSetupRequests holds bench's calls of the public API to the requests they send: the
// route, the query, the JSON body, the Origin identity trusts, and the API key in x-api-key as
// the generator sends it.
func TestSetupRequests(t *testing.T) {
	t.Parallel()
	type call struct {
		method, path, query, body, origin, key, authorization, cookie string
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, call{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Origin"),
			r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("Cookie")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/auth/sign-up/email":
			http.SetCookie(w, &http.Cookie{Name: "svc.session_token", Value: "tok.sig"})
			_, _ = io.WriteString(w, `{"token":"tok","user":{"id":"u1"}}`)
		case r.URL.Path == "/api/auth/get-session":
			_, _ = io.WriteString(w, `{"session":{"activeOrganizationId":"o1"},"user":{"id":"u1"}}`)
		case r.URL.Path == "/api/auth/api-key/create":
			_, _ = io.WriteString(w, `{"id":"k1","key":"svc_key","referenceId":"o1"}`)
		case r.URL.Path == "/api/workflows":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"w1"}`)
		case strings.HasSuffix(r.URL.Path, "/operations"):
			_, _ = io.WriteString(w, `{"ok":true,"version":2,"summary":"Applied all 3 operation(s) successfully.","skipped_items":[],"validation_errors":[]}`)
		case strings.HasSuffix(r.URL.Path, "/run"):
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"runId":"r1"}`)
		case strings.HasSuffix(r.URL.Path, "/logs"):
			_, _ = io.WriteString(w, `{"items":[{"id":"a1","block_id":"b1","startedAt":"2026-01-01T00:00:00.001Z"}],"nextCursor":"c1"}`)
		case r.URL.Path == "/api/runs":
			_, _ = io.WriteString(w, `{"items":[{}],"nextCursor":null}`)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	t.Cleanup(srv.Close)
	env := Env{GatewayURL: srv.URL, Origin: benchOrigin, Log: func(string, ...any) {}}
	ctx := context.Background()

	acct, err := signUp(ctx, env, "test")
	require.NoError(t, err)
	require.Equal(t, account{userID: "u1", email: acct.email, organizationID: "o1", keyID: "k1", key: "svc_key"}, acct)
	keyed, err := keyedClient(env, acct, nil)
	require.NoError(t, err)
	wf, err := buildWorkflow(ctx, keyed, "bench-test", linearOps(map[string]any{"type": "log"}))
	require.NoError(t, err)
	require.Equal(t, "w1", wf)
	id, err := startRun(ctx, keyed, wf)
	require.NoError(t, err)
	items, err := runLogs(ctx, keyed, id)
	require.NoError(t, err)
	require.Len(t, items, 1)
	n, err := countRuns(ctx, keyed, wf, "queued", 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	deleteWorkflows(ctx, env, keyed, []string{wf})

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 9)
	auth := calls[:3]
	for _, c := range auth {
		require.Equal(t, benchOrigin, c.origin, c.path)
		require.Empty(t, c.key, c.path)
	}
	require.Equal(t, "/api/auth/sign-up/email", auth[0].path)
	var up map[string]string
	require.NoError(t, json.Unmarshal([]byte(auth[0].body), &up))
	require.Equal(t, acct.email, up["email"])
	require.Equal(t, "bench test", up["name"])
	require.Equal(t, call{method: http.MethodGet, path: "/api/auth/get-session", origin: benchOrigin, cookie: "svc.session_token=tok.sig"}, auth[1])
	require.Equal(t, "/api/auth/api-key/create", auth[2].path)
	require.JSONEq(t, `{"name":"bench"}`, auth[2].body)

	domain := calls[3:]
	for _, c := range domain {
		require.Equal(t, "svc_key", c.key, c.path)
		require.Empty(t, c.authorization, c.path)
		require.Empty(t, c.cookie, c.path)
	}
	want := []struct{ method, path, query, body string }{
		{http.MethodPost, "/api/workflows", "", `{"name":"bench-test"}`},
		{http.MethodPost, "/api/workflows/w1/operations", "", `{"ops":[
			{"operation_type":"add","block_id":"b0","type":"trigger.manual"},
			{"operation_type":"add","block_id":"b1","type":"log"},
			{"operation_type":"connect","block_id":"b0","target_block_id":"b1"}]}`},
		{http.MethodPost, "/api/workflows/w1/run", "", `{}`},
		{http.MethodGet, "/api/runs/r1/logs", "limit=1000", ""},
		{http.MethodGet, "/api/runs", "limit=10&status=queued&workflowId=w1", ""},
		{http.MethodDelete, "/api/workflows/w1", "", ""},
	}
	require.Len(t, domain, len(want))
	for i, w := range want {
		c := domain[i]
		require.Equal(t, w.method, c.method, w.path)
		require.Equal(t, w.path, c.path)
		require.Equal(t, w.query, c.query, w.path)
		if w.body == "" {
			require.Empty(t, c.body, w.path)
		} else {
			require.JSONEq(t, w.body, c.body, w.path)
		}
	}
}
