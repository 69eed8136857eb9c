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
		b.signer.Sign(h, "GET", "/api/workflows", b.id, b.now)
		got, err := b.signer.Verify(h, "GET", "/api/workflows", b.now.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, b.id, got)
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other, err := internalauth.NewSigner(strings.Repeat("x", 32))
		require.NoError(t, err)

		for _, tc := range []struct {
			name   string
			mutate func(h http.Header) (method, path string, at time.Time)
		}{
			{"Missing", func(h http.Header) (string, string, time.Time) {
				internalauth.Strip(h)
				return "GET", "/api/workflows", b.now
			}},
			{"OtherPath", func(http.Header) (string, string, time.Time) { return "GET", "/api/runs", b.now }},
			{"OtherMethod", func(http.Header) (string, string, time.Time) { return "DELETE", "/api/workflows", b.now }},
			{"Stale", func(http.Header) (string, string, time.Time) {
				return "GET", "/api/workflows", b.now.Add(internalauth.MaxSkew + time.Second)
			}},
			{"ForgedIdentity", func(h http.Header) (string, string, time.Time) {
				h.Set(internalauth.HeaderIdentity, "eyJvcmciOiJvcmdfZXZpbCJ9")
				return "GET", "/api/workflows", b.now
			}},
			{"OtherSecret", func(h http.Header) (string, string, time.Time) {
				other.Sign(h, "GET", "/api/workflows", b.id, b.now)
				return "GET", "/api/workflows", b.now
			}},
			{"GarbageTimestamp", func(h http.Header) (string, string, time.Time) {
				h.Set(internalauth.HeaderTimestamp, "yesterday")
				return "GET", "/api/workflows", b.now
			}},
		} {
			h := http.Header{}
			b.signer.Sign(h, "GET", "/api/workflows", b.id, b.now)
			method, path, at := tc.mutate(h)
			_, err := b.signer.Verify(h, method, path, at)
			require.ErrorIs(t, err, internalauth.ErrInvalid, tc.name)
		}
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
		b.signer.Sign(req.Header, "GET", "/api/x", b.id, b.now)
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
	s.Sign(h, "GET", "/p", internalauth.Identity{UserID: "u"}, now)
	f.Add(h.Get(internalauth.HeaderIdentity), h.Get(internalauth.HeaderTimestamp), h.Get(internalauth.HeaderSignature))
	f.Add("", "", "")
	f.Add("%%%", "-1", "AAAA")
	f.Fuzz(func(t *testing.T, payload, ts, sig string) {
		in := http.Header{}
		in.Set(internalauth.HeaderIdentity, payload)
		in.Set(internalauth.HeaderTimestamp, ts)
		in.Set(internalauth.HeaderSignature, sig)
		id, err := s.Verify(in, "GET", "/p", now)
		if err == nil && (payload != h.Get(internalauth.HeaderIdentity) || sig != h.Get(internalauth.HeaderSignature)) {
			t.Fatalf("accepted a header set it never signed: %+v", id)
		}
	})
}
