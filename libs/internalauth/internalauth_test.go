package internalauth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
)

const secret = "0123456789abcdef0123456789abcdef"

func TestSigner(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		signer internalauth.Signer
		id     internalauth.Identity
		now    time.Time
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s, err := internalauth.NewSigner(secret)
		require.NoError(t, err)
		return &testBundle{
			signer: s,
			id:     internalauth.Identity{UserID: "usr_1", Email: "a@b.c", OrganizationID: "org_1", AuthMode: internalauth.ModeSession},
			now:    time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		}
	}

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := http.Header{}
		b.signer.Sign(h, "GET", "/api/workflows", "", b.id, b.now)
		got, err := b.signer.Verify(h, "GET", "/api/workflows", "", b.now.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, b.id, got)

		withQuery := internalauth.Identity{AuthMode: internalauth.ModeService, Service: "gateway", ClientIP: "2001:db8::1"}
		b.signer.Sign(h, "GET", "/api/workflows", "limit=2&after=x", withQuery, b.now)
		got, err = b.signer.Verify(h, "GET", "/api/workflows", "limit=2&after=x", b.now)
		require.NoError(t, err)
		require.Equal(t, withQuery, got)
	})

	// A request without a query is signed exactly as before the query was covered, so that
	// copies of the format (tools/bench) and peers on the previous version still agree.
	t.Run("QuerylessFormatIsUnchanged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := http.Header{}
		b.signer.Sign(h, http.MethodGet, "/api/connectors", "",
			internalauth.Identity{UserID: "usr_1", Email: "a@b.c", OrganizationID: "org_1", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1"},
			time.UnixMilli(1790000000123))
		require.Equal(t, "z45COsQNq_hSz1UdZoZ3wrD9LjmosNp90IfSX2QHrpg", h.Get(internalauth.HeaderSignature))
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other, err := internalauth.NewSigner(strings.Repeat("x", 32))
		require.NoError(t, err)

		for _, tc := range []struct {
			name   string
			mutate func(h http.Header) (method, path, query string, at time.Time)
		}{
			{"Missing", func(h http.Header) (string, string, string, time.Time) {
				internalauth.Strip(h)
				return "GET", "/api/workflows", "limit=1", b.now
			}},
			{"OtherPath", func(http.Header) (string, string, string, time.Time) { return "GET", "/api/runs", "limit=1", b.now }},
			{"OtherMethod", func(http.Header) (string, string, string, time.Time) {
				return "DELETE", "/api/workflows", "limit=1", b.now
			}},
			{"OtherQuery", func(http.Header) (string, string, string, time.Time) {
				return "GET", "/api/workflows", "limit=500", b.now
			}},
			{"NoQuery", func(http.Header) (string, string, string, time.Time) { return "GET", "/api/workflows", "", b.now }},
			// The query cannot be moved into the path or the other way round.
			{"QueryInPath", func(http.Header) (string, string, string, time.Time) {
				return "GET", "/api/workflows?limit=1", "", b.now
			}},
			{"Stale", func(http.Header) (string, string, string, time.Time) {
				return "GET", "/api/workflows", "limit=1", b.now.Add(internalauth.MaxSkew + time.Second)
			}},
			{"ForgedIdentity", func(h http.Header) (string, string, string, time.Time) {
				h.Set(internalauth.HeaderIdentity, "eyJvcmciOiJvcmdfZXZpbCJ9")
				return "GET", "/api/workflows", "limit=1", b.now
			}},
			{"OtherSecret", func(h http.Header) (string, string, string, time.Time) {
				other.Sign(h, "GET", "/api/workflows", "limit=1", b.id, b.now)
				return "GET", "/api/workflows", "limit=1", b.now
			}},
			{"GarbageTimestamp", func(h http.Header) (string, string, string, time.Time) {
				h.Set(internalauth.HeaderTimestamp, "yesterday")
				return "GET", "/api/workflows", "limit=1", b.now
			}},
		} {
			h := http.Header{}
			b.signer.Sign(h, "GET", "/api/workflows", "limit=1", b.id, b.now)
			method, path, query, at := tc.mutate(h)
			_, err := b.signer.Verify(h, method, path, query, at)
			require.ErrorIs(t, err, internalauth.ErrInvalid, tc.name)
		}
	})

	t.Run("ZeroSignerVerifiesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var zero internalauth.Signer
		h := http.Header{}
		zero.Sign(h, "GET", "/api/x", "", b.id, b.now) // what anyone can compute without a secret
		_, err := zero.Verify(h, "GET", "/api/x", "", b.now)
		require.ErrorIs(t, err, internalauth.ErrInvalid)
	})

	t.Run("MiddlewareAnswers401", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := b.signer.Require(func() time.Time { return b.now })(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, ok := internalauth.FromContext(r.Context())
			require.True(t, ok)
			_, _ = w.Write([]byte(id.OrganizationID))
		}))

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/x", nil))
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.JSONEq(t, `{"error":"unauthorized"}`, rec.Body.String())

		req := httptest.NewRequest("GET", "/api/x", nil)
		b.signer.Sign(req.Header, "GET", "/api/x", "", b.id, b.now)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "org_1", rec.Body.String())
	})
}

func FuzzVerify(f *testing.F) {
	s, err := internalauth.NewSigner(secret)
	require.NoError(f, err)
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	s.Sign(h, "GET", "/p", "", internalauth.Identity{UserID: "u"}, now)
	f.Add(h.Get(internalauth.HeaderIdentity), h.Get(internalauth.HeaderTimestamp), h.Get(internalauth.HeaderSignature))
	f.Add("", "", "")
	f.Add("%%%", "-1", "AAAA")
	f.Fuzz(func(t *testing.T, payload, ts, sig string) {
		in := http.Header{}
		in.Set(internalauth.HeaderIdentity, payload)
		in.Set(internalauth.HeaderTimestamp, ts)
		in.Set(internalauth.HeaderSignature, sig)
		id, err := s.Verify(in, "GET", "/p", "", now)
		if err == nil && (payload != h.Get(internalauth.HeaderIdentity) || sig != h.Get(internalauth.HeaderSignature)) {
			t.Fatalf("accepted a header set it never signed: %+v", id)
		}
	})
}

// A header set the transport signed for one query is refused with another: a captured
// request cannot be replayed with its query changed.
func TestQueryIsSigned(t *testing.T) {
	t.Parallel()
	s, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	var captured http.Header
	srv := httptest.NewServer(s.Require(time.Now)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		captured = r.Header.Clone()
		_, _ = w.Write([]byte(r.URL.RawQuery))
	})))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: internalauth.Transport{Signer: s, Service: "scheduler", Base: http.DefaultTransport, Now: time.Now}}
	res, err := hc.Get(srv.URL + "/api/workflows?limit=1")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode, "signed with its query")

	for _, query := range []string{"?limit=500", "", "?limit=1&after=x"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/workflows"+query, nil)
		require.NoError(t, err)
		for _, h := range []string{internalauth.HeaderIdentity, internalauth.HeaderTimestamp, internalauth.HeaderSignature} {
			req.Header.Set(h, captured.Get(h))
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, "replayed with %q", query)
	}
}
