package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/app/apptest"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/ports/httpapi"
)

type fakeEpoch struct {
	mu    sync.Mutex
	bumps int
	fail  int // how many Bump calls fail first
}

func (f *fakeEpoch) Bump(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bumps++
	if f.fail > 0 {
		f.fail--
		return errors.New("redis down")
	}
	return nil
}

func (f *fakeEpoch) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bumps
}

func epochRouter(t *testing.T, ep *fakeEpoch) http.Handler {
	t.Helper()
	signer, err := session.NewSigner([]byte(strings.Repeat("s", 32)))
	require.NoError(t, err)
	public, err := url.Parse("http://localhost:8080")
	require.NoError(t, err)
	origins, err := httpapi.NewOrigins("http://localhost:8080")
	require.NoError(t, err)
	s := httpapi.NewServer(apptest.New(t, apptest.Options{}).App, httpapi.Config{
		PublicURL: public, Origins: origins, Signer: signer, Revocations: ep,
	}, slog.New(slog.DiscardHandler))
	return httpapi.NewRouter(s)
}

func call(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://localhost:8080")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every successful mutating auth call moves the revocation epoch before it answers; reads and
// failures do not; a failed bump is retried once and the answer is sent anyway.
func TestMutatingAuthCallsBumpTheEpoch(t *testing.T) {
	ep := &fakeEpoch{}
	h := epochRouter(t, ep)

	rec := call(h, http.MethodPost, "/api/auth/sign-up/email", `{"email":"ada@example.com","password":"correct horse battery","name":"Ada"}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "ada@example.com", "the buffered body is sent whole")
	require.NotEmpty(t, rec.Header().Values("Set-Cookie"), "headers survive the buffering")
	require.Equal(t, 1, ep.count())

	rec = call(h, http.MethodGet, "/api/auth/get-session", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, 1, ep.count(), "reads do not bump")

	rec = call(h, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"wrong password!"}`)
	require.GreaterOrEqual(t, rec.Code, 400)
	require.Equal(t, 1, ep.count(), "failures do not bump")

	ep.fail = 2
	rec = call(h, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"correct horse battery"}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, 3, ep.count(), "one retry, then the answer is sent anyway")
}
