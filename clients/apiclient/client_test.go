package apiclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestToError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		header http.Header
		body   string
		want   Error
		text   string
	}{
		{
			name: "ServiceError", status: 404, body: `{"error":"not_found","message":"workflow not found"}`,
			want: Error{Status: 404, Code: "not_found", Message: "workflow not found"}, text: "not_found: workflow not found",
		},
		{
			name: "AuthLayerError", status: 401, body: `{"code":"INVALID_CREDENTIALS","message":"Invalid email or password"}`,
			want: Error{Status: 401, Code: "INVALID_CREDENTIALS", Message: "Invalid email or password"}, text: "INVALID_CREDENTIALS: Invalid email or password",
		},
		{
			name: "InvalidBodyIssues", status: 400, body: `{"error":"invalid_body","issues":[{"path":"/ops/0/type","message":"is required"}]}`,
			want: Error{Status: 400, Code: "invalid_body", Issues: []Issue{{Path: "/ops/0/type", Message: "is required"}}}, text: "invalid_body",
		},
		{
			name: "VersionMismatch", status: 412, body: `{"error":"version_mismatch","current":7}`,
			want: Error{Status: 412, Code: "version_mismatch", Current: 7}, text: "version_mismatch",
		},
		{
			name: "RateLimitedBody", status: 429, body: `{"error":"rate_limited","retryAfterMs":1500}`, header: http.Header{"Retry-After": {"2"}},
			want: Error{Status: 429, Code: "rate_limited", RetryAfter: 1500 * time.Millisecond}, text: "rate_limited",
		},
		{
			name: "RateLimitedHeaderOnly", status: 429, body: `{"code":"RATE_LIMITED","message":"slow down"}`, header: http.Header{"Retry-After": {"3"}},
			want: Error{Status: 429, Code: "RATE_LIMITED", Message: "slow down", RetryAfter: 3 * time.Second}, text: "RATE_LIMITED: slow down",
		},
		{
			name: "NotJSON", status: 502, body: "Bad Gateway\n",
			want: Error{Status: 502, Message: "Bad Gateway"}, text: "HTTP 502: Bad Gateway",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			got := toError(&response{status: tt.status, header: h, body: []byte(tt.body)})
			if tt.want.RetryAfter == 0 {
				tt.want.RetryAfter = time.Second // the floor when the API names no wait
			}
			tt.want.Body = []byte(tt.body)
			require.Equal(t, tt.want, *got)
			require.Equal(t, tt.text, got.Error())
			require.True(t, IsCode(got, tt.want.Code) || tt.want.Code == "")
		})
	}
}

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://localhost:8080":             "http://localhost:8080",
		"http://localhost:8080/":            "http://localhost:8080",
		" https://svc.example.com/base/ ":   "https://svc.example.com/base",
		"https://svc.example.com/?x=1#frag": "https://svc.example.com",
	} {
		got, err := NormalizeURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "localhost:8080", "ftp://x", "http://", "/api"} {
		_, err := NormalizeURL(bad)
		require.Error(t, err, bad)
	}
}

func TestOriginAndKeyHeader(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, body string
		header             http.Header
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, string(b), r.Header.Clone()}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"claimed":0,"fired":[],"failed":[]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, srv.Client(), "")
	require.NoError(t, err)

	// By default: the API's own Origin, the key as a bearer token.
	_, err = c.Tick(t.Context(), "svc_key")
	require.NoError(t, err)
	s := <-got
	require.Equal(t, http.MethodPost, s.method)
	require.Equal(t, "/api/admin/tick", s.path)
	require.JSONEq(t, `{}`, s.body)
	require.Equal(t, srv.URL, s.header.Get("Origin"))
	require.Equal(t, "Bearer svc_key", s.header.Get("Authorization"))
	require.Empty(t, s.header.Get("X-Api-Key"))

	// WithOrigin and WithAPIKeyHeader, with the key of WithAuth.
	kc := c.WithOrigin("http://bench.test").WithAPIKeyHeader().WithAuth(Auth{APIKey: "svc_other"})
	raw, err := kc.Tick(t.Context(), "")
	require.NoError(t, err)
	require.JSONEq(t, `{"claimed":0,"fired":[],"failed":[]}`, string(raw))
	s = <-got
	require.Equal(t, "http://bench.test", s.header.Get("Origin"))
	require.Equal(t, "svc_other", s.header.Get("X-Api-Key"))
	require.Empty(t, s.header.Get("Authorization"))

	// The client it came from is unchanged.
	_, err = c.GetRun(t.Context(), "svc_key", "r1", false)
	require.NoError(t, err)
	s = <-got
	require.Equal(t, "/api/runs/r1", s.path)
	require.Equal(t, srv.URL, s.header.Get("Origin"))
	require.Equal(t, "Bearer svc_key", s.header.Get("Authorization"))
}
