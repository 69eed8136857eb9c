package httprequest_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin/httprequest"
)

// TestPrivateTargetsAreRefusedWithTheSetting (issue 22): under the private-network policy an
// http.request to a loopback, private or link-local address (by name too: localhost) fails
// before anything is sent, with ErrPrivateTarget, which the engine does not retry, and a
// message that names the setting allowing such targets.
func TestPrivateTargetsAreRefusedWithTheSetting(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	exec := httprequest.Runtime().New(connectors.Config{Log: slog.New(slog.DiscardHandler)})

	for _, tt := range []struct{ url, ip string }{
		{srv.URL + "/health", "127.0.0.1"},
		{"http://localhost:" + port + "/health", ""}, // 127.0.0.1 or ::1
		{"http://10.1.2.3/internal", "10.1.2.3"},
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			_, err := exec.Execute(t.Context(), connectors.Call{Params: map[string]any{"method": "GET", "url": tt.url}})
			require.ErrorIs(t, err, httprequest.ErrPrivateTarget)
			require.ErrorContains(t, err, "GET "+tt.url+": ")
			require.ErrorContains(t, err, tt.ip+" is a loopback, private or link-local address, refused by the private-network policy")
			require.ErrorContains(t, err, "SVC_HTTP_ALLOW_PRIVATE=1 on run-orchestrator allows such targets")
		})
	}
	t.Run("Allowed", func(t *testing.T) {
		t.Parallel()
		res, err := exec.Execute(t.Context(), connectors.Call{Params: map[string]any{"method": "GET", "url": srv.URL + "/ok", "allow_private_network": true}})
		require.NoError(t, err)
		require.Equal(t, 200, res.Output.(map[string]any)["status"])
	})
	t.Cleanup(func() { require.EqualValues(t, 1, hits.Load(), "only the allowed request reached the server") })
}

// when that form is longer than the bytes (escapes).
func TestHTTPOutputFitsTheBound(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Pad", strings.Repeat("h", 4000))
		switch r.URL.Path {
		case "/json": // a JSON document just under the bound whose re-encoding grows (<, >)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"s":"` + strings.Repeat("<>", (limit-20)/2) + `"}`))
		case "/controls": // every byte becomes \u00XX in JSON
			_, _ = w.Write([]byte(strings.Repeat("\x01", 3*limit)))
		case "/small":
			_, _ = w.Write([]byte("ok"))
		default: // longer than the bound
			_, _ = w.Write([]byte(strings.Repeat("é", limit)))
		}
	}))
	t.Cleanup(srv.Close)
	ex := httprequest.Runtime().New(connectors.Config{Log: slog.New(slog.DiscardHandler), AllowPrivateNetwork: true, MaxOutput: limit})
	for _, path := range []string{"/json", "/controls", "/long", "/small"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			res, err := ex.Execute(context.Background(), connectors.Call{Params: map[string]any{
				"method": "GET", "url": srv.URL + path, "allow_private_network": true}})
			require.NoError(t, err)
			enc, err := json.Marshal(res.Output)
			require.NoError(t, err)
			require.LessOrEqual(t, len(enc), limit)
			out := res.Output.(map[string]any)
			if path == "/small" {
				require.Equal(t, "ok", out["body"])
				require.NotContains(t, out, "truncated")
				return
			}
			require.Equal(t, true, out["truncated"])
			require.Greater(t, len(enc), limit*9/10, "the body is cut to fit, not dropped")
			require.True(t, json.Valid(enc))
		})
	}

	t.Run("HeadersAreBounded", func(t *testing.T) {
		t.Parallel()
		huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for i := range 40 {
				w.Header().Set("X-Pad-"+strings.Repeat("p", i), strings.Repeat("h", 4000))
			}
		}))
		t.Cleanup(huge.Close)
		_, err := ex.Execute(context.Background(), connectors.Call{Params: map[string]any{
			"method": "GET", "url": huge.URL, "allow_private_network": true}})
		require.Error(t, err)
		require.False(t, errors.Is(err, context.DeadlineExceeded))
	})
}
