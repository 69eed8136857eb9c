package apiclient

import (
	"net/http"
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
