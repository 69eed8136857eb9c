package executors_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/adapters/executors"
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
	exec := executors.Executors(slog.New(slog.DiscardHandler), executors.HTTPConfig{})["http.request"]

	for _, tt := range []struct{ url, ip string }{
		{srv.URL + "/health", "127.0.0.1"},
		{"http://localhost:" + port + "/health", ""}, // 127.0.0.1 or ::1
		{"http://10.1.2.3/internal", "10.1.2.3"},
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			_, err := exec.Execute(t.Context(), executors.Call{Params: map[string]any{"method": "GET", "url": tt.url}})
			require.ErrorIs(t, err, executors.ErrPrivateTarget)
			require.ErrorContains(t, err, "GET "+tt.url+": ")
			require.ErrorContains(t, err, tt.ip+" is a loopback, private or link-local address, refused by the private-network policy")
			require.ErrorContains(t, err, "SVC_HTTP_ALLOW_PRIVATE=1 on run-orchestrator allows such targets")
		})
	}
	t.Run("Allowed", func(t *testing.T) {
		t.Parallel()
		res, err := exec.Execute(t.Context(), executors.Call{Params: map[string]any{"method": "GET", "url": srv.URL + "/ok", "allow_private_network": true}})
		require.NoError(t, err)
		require.Equal(t, 200, res.Output.(map[string]any)["status"])
	})
	t.Cleanup(func() { require.EqualValues(t, 1, hits.Load(), "only the allowed request reached the server") })
}
