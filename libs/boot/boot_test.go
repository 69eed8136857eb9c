package boot_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
)

const secret = "0123456789abcdef0123456789abcdef"

func TestReadConfig(t *testing.T) {
	t.Parallel()
	lookup := func(m map[string]string) env.LookupFunc {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}

	r := env.New(lookup(map[string]string{"SVC_INTERNAL_SECRET": secret}))
	cfg := boot.ReadConfig(r, boot.Needs{Postgres: true, Redis: true})
	require.NoError(t, r.Err())
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", cfg.DatabaseURL)
	require.Equal(t, "redis://127.0.0.1:6379/0", cfg.RedisURL)
	require.Equal(t, slog.LevelInfo, cfg.LogLevel)

	r = env.New(lookup(map[string]string{"SVC_LOG_LEVEL": "loud", "SVC_DATABASE_URL": "mysql://x/y"}))
	boot.ReadConfig(r, boot.Needs{Postgres: true})
	err := r.Err()
	require.Error(t, err)
	for _, name := range []string{"SVC_INTERNAL_SECRET", "SVC_LOG_LEVEL", "SVC_DATABASE_URL"} {
		require.Contains(t, err.Error(), name)
	}
}

func TestBase(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		srv    *httptest.Server
		signer internalauth.Signer
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		cfg := boot.Config{
			DatabaseURL: testkit.NewDatabase(t), RedisURL: testkit.RedisURL(t), RedisPrefix: "t:",
			InternalSecret: secret, Drain: time.Second,
		}
		migrations := fstest.MapFS{"0001_x.sql": {Data: []byte("-- +goose Up\nCREATE TABLE x (id int);\n-- +goose Down\nDROP TABLE x;\n")}}
		base, err := boot.Start(context.Background(), cfg, boot.Spec{
			Name: "test", Schema: "things", Migrations: migrations, Needs: boot.Needs{Postgres: true, Redis: true},
		}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(base.Close)

		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, _ := internalauth.FromContext(r.Context())
			_, _ = io.WriteString(w, "api:"+id.OrganizationID)
		})
		rpc := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "rpc") })
		srv := httptest.NewServer(base.Handler(boot.Routes{
			API: api, OpenPrefixes: []string{"/api/open/"}, RPC: map[string]http.Handler{"/x.v1.X/": rpc},
		}))
		t.Cleanup(srv.Close)
		signer, err := internalauth.NewSigner(secret)
		require.NoError(t, err)
		return &testBundle{srv: srv, signer: signer}
	}

	get := func(t *testing.T, url string, h http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	t.Run("Surface", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		signed := http.Header{}
		b.signer.Sign(signed, "GET", "/api/things", "", internalauth.Identity{OrganizationID: "org_1", AuthMode: internalauth.ModeSession}, time.Now())
		rpcSigned := http.Header{}
		b.signer.Sign(rpcSigned, "GET", "/x.v1.X/Do", "", internalauth.Identity{AuthMode: internalauth.ModeService, Service: "gateway"}, time.Now())

		for _, tc := range []struct {
			name   string
			path   string
			header http.Header
			status int
			body   string
		}{
			{"Health", "/health", nil, 200, `{"status":"ok","version":"dev"}`},
			{"Ready", "/ready", nil, 200, `{"checks":{"postgres":"ok","redis":"ok"},"status":"ok"}`},
			{"GuardedWithout", "/api/things", nil, 401, `{"error":"unauthorized"}`},
			{"GuardedSigned", "/api/things", signed, 200, "api:org_1"},
			{"OpenPrefix", "/api/open/x", nil, 200, "api:"},
			{"RPCUnsigned", "/x.v1.X/Do", nil, 401, `{"error":"unauthorized"}`},
			{"RPCSigned", "/x.v1.X/Do", rpcSigned, 200, "rpc"},
			{"Elsewhere", "/nope", nil, 404, `{"error":"not_found"}`},
		} {
			status, body := get(t, b.srv.URL+tc.path, tc.header)
			require.Equal(t, tc.status, status, tc.name)
			require.Equal(t, tc.body, body, tc.name)
		}
		status, body := get(t, b.srv.URL+"/metrics", nil)
		require.Equal(t, 200, status)
		require.Contains(t, body, "http_server_request_duration_seconds", "request metrics are recorded")
		require.Contains(t, body, "pgxpool", "pool metrics are recorded")
	})

	t.Run("RefusesAShortSecret", func(t *testing.T) {
		t.Parallel()
		_, err := boot.Start(context.Background(), boot.Config{InternalSecret: "short"}, boot.Spec{Name: "x"}, slog.New(slog.DiscardHandler))
		require.ErrorContains(t, err, "SVC_INTERNAL_SECRET")
	})
}

// TestServeAll: every surface is bound before any serves, so the first to answer vouches for
// the rest; one address that cannot be bound frees those already bound and serves nothing.
func TestServeAll(t *testing.T) {
	t.Parallel()
	base, err := boot.Start(context.Background(), boot.Config{InternalSecret: secret, Drain: time.Second},
		boot.Spec{Name: "test"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(base.Close)
	hello := func(word string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, word) })
	}

	t.Run("BoundBeforeServed", func(t *testing.T) {
		t.Parallel()
		public, admin := freeAddr(t), freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- base.ServeAll(ctx, boot.Surface{Addr: public, Handler: hello("public")}, boot.Surface{Addr: admin, Handler: hello("admin")})
		}()
		// Poll the last surface; the moment it answers, the first must answer too, without retry.
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + admin + "/")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return true
		}, 10*time.Second, 5*time.Millisecond)
		resp, err := http.Get("http://" + public + "/")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, "public", string(body))
		cancel()
		require.NoError(t, <-done)
	})

	t.Run("OneAddressTaken", func(t *testing.T) {
		t.Parallel()
		taken := httptest.NewServer(hello("other"))
		t.Cleanup(taken.Close)
		free := freeAddr(t)
		err := base.ServeAll(context.Background(), boot.Surface{Addr: free, Handler: hello("first")},
			boot.Surface{Addr: strings.TrimPrefix(taken.URL, "http://"), Handler: hello("second")})
		require.Error(t, err)
		// The first address was released: it can be bound again.
		ln, err := net.Listen("tcp", free)
		require.NoError(t, err)
		_ = ln.Close()
	})
}

// freeAddr is an address nothing listens on a moment ago (the kernel's pick, released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
