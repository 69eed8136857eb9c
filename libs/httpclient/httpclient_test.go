package httpclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc.dev/libs/httpclient"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/telemetry"
	"svc.dev/proto/errs"
)

func TestClient(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		signer internalauth.Signer
		hits   *atomic.Int64
		status *atomic.Int64
		client *httpclient.Client
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		signer, err := internalauth.NewSigner("0123456789abcdef0123456789abcdef")
		require.NoError(t, err)
		b := &testBundle{signer: signer, hits: &atomic.Int64{}, status: &atomic.Int64{}}
		b.status.Store(http.StatusOK)
		srv := httptest.NewServer(signer.Require(time.Now)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.hits.Add(1)
			id, _ := internalauth.FromContext(r.Context())
			w.Header().Set("Content-Type", "application/json")
			switch code := int(b.status.Load()); code {
			case http.StatusOK:
				_, _ = w.Write([]byte(`{"caller":"` + id.Service + `","org":"` + id.OrganizationID + `"}`))
			default:
				w.WriteHeader(code)
				_, _ = w.Write([]byte(`{"error":"version_mismatch","current":3}`))
			}
		})))
		t.Cleanup(srv.Close)
		b.client = httpclient.New(httpclient.Config{
			Peer: "editor", BaseURL: srv.URL, Service: "scheduler", Signer: signer,
			Telemetry:      telemetry.NewWithProvider(sdktrace.NewTracerProvider()),
			FailuresToOpen: 3, OpenFor: time.Hour,
		})
		return b
	}

	t.Run("SignsAsCallerOrAsClient", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var out struct{ Caller, Org string }
		require.NoError(t, b.client.Do(context.Background(), "GET", "/x", nil, &out))
		require.Equal(t, "scheduler", out.Caller)
		require.Empty(t, out.Org)

		ctx := internalauth.WithIdentity(context.Background(), internalauth.Identity{OrganizationID: "org_1", AuthMode: internalauth.ModeSession})
		require.NoError(t, b.client.Do(ctx, "GET", "/x", nil, &out))
		require.Equal(t, "org_1", out.Org)
	})

	t.Run("DecodesErrorBodies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.status.Store(http.StatusPreconditionFailed)
		err := b.client.Do(context.Background(), "POST", "/x", map[string]int{"a": 1}, nil)
		var e *errs.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, errs.VersionMismatch, e.Code)
		require.InDelta(t, 3.0, e.Fields["current"], 0)
	})

	t.Run("BreakerOpensOnADeadPeer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.status.Store(http.StatusServiceUnavailable)
		for range 3 {
			err := b.client.Do(context.Background(), "GET", "/x", nil, nil)
			require.Error(t, err)
		}
		require.Equal(t, int64(3), b.hits.Load())
		err := b.client.Do(context.Background(), "GET", "/x", nil, nil)
		var e *errs.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, errs.Unavailable, e.Code)
		require.Equal(t, int64(3), b.hits.Load(), "an open breaker does not call the peer")
	})
}
