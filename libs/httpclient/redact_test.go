package httpclient_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"svc.dev/libs/httpclient"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/telemetry"
)

// TestClientSpansRedactTheQuery: a forwarded request's query (POST
// /api/auth/reset-password?token=...) reaches the peer intact, and no span records a value of
// it (issue 21: the reset token was in the client span's url.full).
func TestClientSpansRedactTheQuery(t *testing.T) {
	t.Parallel()
	const secret = "rst_5ecret-t0ken"
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	spans := tracetest.NewSpanRecorder()
	tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	signer, err := internalauth.NewSigner("0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	c := httpclient.New(httpclient.Config{Peer: "identity", BaseURL: srv.URL, Signer: signer, Telemetry: tel})

	for _, rt := range []http.RoundTripper{c.Transport(), c.HTTP().Transport} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
			srv.URL+"/api/auth/reset-password?token="+secret+"&redirectTo=%2Fsignin%3Fnext%3D"+secret, strings.NewReader(`{}`))
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Contains(t, gotQuery, secret, "the peer gets the query as sent")
	}

	ended := spans.Ended()
	require.Len(t, ended, 2)
	for _, s := range ended {
		found := false
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.String(), secret, "attribute %s", kv.Key)
			if kv.Key == "url.full" {
				found = true
				require.Equal(t, srv.URL+"/api/auth/reset-password?redirectTo=REDACTED&token=REDACTED", kv.Value.AsString())
			}
		}
		require.True(t, found, "url.full is still recorded")
		require.NotContains(t, s.Name(), secret)
	}
}

func TestRedactedURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://h/p":                     "http://h/p",
		"http://h/p?":                    "http://h/p",
		"http://u:pw@h/p?a=1&a=2&b=":     "http://h/p?a=REDACTED&a=REDACTED&b=REDACTED",
		"https://h:8443/x?token=abc#top": "https://h:8443/x?token=REDACTED#top",
		"http://h/p?%zz=1":               "http://h/p?REDACTED",
	} {
		u, err := url.Parse(in)
		require.NoError(t, err)
		require.Equal(t, want, httpclient.RedactedURL(u), in)
	}
}
