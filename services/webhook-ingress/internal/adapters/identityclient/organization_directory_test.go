package identityclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/webhook-ingress/internal/adapters/identityclient"
	"svc.dev/services/webhook-ingress/internal/app/port"
)

const (
	acmeID  = "org_01jaaaaaaaaaaaaaaaaaaaaaaa"
	otherID = "org_01jbbbbbbbbbbbbbbbbbbbbbbb"
)

// fakeIdentity is the identity logic behind a real identity.v1 Connect handler: organizations
// by slug, a failure to answer with, and the slugs it was asked for.
type fakeIdentity struct {
	identityv1connect.UnimplementedIdentityServiceHandler

	mu    sync.Mutex
	orgs  map[string]string
	err   error
	asked []string
}

func (f *fakeIdentity) LookupOrganization(_ context.Context, req *connect.Request[identityv1.LookupOrganizationRequest]) (*connect.Response[identityv1.LookupOrganizationResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, req.Msg.GetSlug())
	if f.err != nil {
		return nil, f.err
	}
	id, ok := f.orgs[req.Msg.GetSlug()]
	if !ok {
		return connect.NewResponse(&identityv1.LookupOrganizationResponse{
			Result: &identityv1.LookupOrganizationResponse_NotFound{NotFound: &identityv1.NotFound{}}}), nil
	}
	return connect.NewResponse(&identityv1.LookupOrganizationResponse{Result: &identityv1.LookupOrganizationResponse_Organization{
		Organization: &identityv1.Organization{Id: id, Slug: req.Msg.GetSlug()}}}), nil
}

func (f *fakeIdentity) set(slug, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orgs[slug] = id
}

func (f *fakeIdentity) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeIdentity) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type testBundle struct {
	identity *fakeIdentity
	srv      *httptest.Server
	clock    *clock
	dir      *identityclient.OrganizationDirectory
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	f := &fakeIdentity{orgs: map[string]string{}}
	path, handler := identityv1connect.NewIdentityServiceHandler(f)
	mux := http.NewServeMux()
	mux.Handle(path, handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := &clock{now: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)}
	dir := identityclient.New(srv.Client(), srv.URL, identityclient.Config{TTL: 5 * time.Second, Now: c.Now})
	return &testBundle{identity: f, srv: srv, clock: c, dir: dir}
}

func requireUnavailable(t *testing.T, err error) {
	t.Helper()
	var down *port.UnavailableError
	require.True(t, errors.As(err, &down), "want *port.UnavailableError, got %v", err)
	require.Equal(t, "identity", down.Peer)
	require.NotErrorIs(t, err, port.ErrOrganizationNotFound)
}

func TestDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnIDIsItsOwnAnswerWithoutACall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.srv.Close() // not even reachable
		id, err := b.dir.Resolve(ctx, acmeID)
		require.NoError(t, err)
		require.Equal(t, acmeID, id)
		require.Empty(t, b.identity.calls())
	})

	t.Run("AFoundSlugIsCachedForTheTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.identity.set("acme", acmeID)
		b.identity.set("other", otherID)
		for range 3 {
			id, err := b.dir.Resolve(ctx, "acme")
			require.NoError(t, err)
			require.Equal(t, acmeID, id)
		}
		require.Equal(t, []string{"acme"}, b.identity.calls())

		// Each slug has its own entry.
		id, err := b.dir.Resolve(ctx, "other")
		require.NoError(t, err)
		require.Equal(t, otherID, id)
		require.Equal(t, []string{"acme", "other"}, b.identity.calls())

		// Within the TTL, identity is not asked: even its outage does not show.
		b.identity.fail(connect.NewError(connect.CodeUnavailable, errors.New("database down")))
		b.clock.advance(5*time.Second - time.Millisecond)
		id, err = b.dir.Resolve(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, acmeID, id)
		require.Len(t, b.identity.calls(), 2)

		// Past it, identity is asked again.
		b.clock.advance(time.Millisecond)
		_, err = b.dir.Resolve(ctx, "acme")
		requireUnavailable(t, err)
		require.Equal(t, []string{"acme", "other", "acme"}, b.identity.calls())
		b.identity.fail(nil)
		id, err = b.dir.Resolve(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, acmeID, id)
		require.Len(t, b.identity.calls(), 4, "a failure is not cached either")
	})

	t.Run("NotFoundIsNeverCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 2 {
			_, err := b.dir.Resolve(ctx, "acme")
			require.ErrorIs(t, err, port.ErrOrganizationNotFound)
		}
		require.Len(t, b.identity.calls(), 2)

		// The organization is created: the very next delivery finds it, with no time passing.
		b.identity.set("acme", acmeID)
		id, err := b.dir.Resolve(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, acmeID, id)
		require.Equal(t, []string{"acme", "acme", "acme"}, b.identity.calls())
	})

	t.Run("TheCacheIsBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		slug := func(i int) string { return fmt.Sprintf("org-%d", i) }
		id := func(i int) string { return fmt.Sprintf("org_01j%023d", i) }
		n := identityclient.MaxCached + 10
		for i := range n {
			b.identity.set(slug(i), id(i))
		}
		resolveAll := func() {
			t.Helper()
			for i := range n {
				got, err := b.dir.Resolve(ctx, slug(i))
				require.NoError(t, err)
				require.Equal(t, id(i), got)
			}
		}
		resolveAll()
		require.Len(t, b.identity.calls(), n)
		// The first MaxCached are cached; the rest were answered but not kept.
		resolveAll()
		require.Len(t, b.identity.calls(), n+10)
		// Once they expire, room is made again.
		b.clock.advance(5 * time.Second)
		resolveAll()
		require.Len(t, b.identity.calls(), 2*n+10)
		resolveAll()
		require.Len(t, b.identity.calls(), 2*n+10+10)
	})

	t.Run("IdentityNotAnsweringIsUnavailableNeverNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, code := range []connect.Code{connect.CodeUnavailable, connect.CodeInternal, connect.CodeDeadlineExceeded} {
			b.identity.fail(connect.NewError(code, errors.New("no")))
			_, err := b.dir.Resolve(ctx, "acme")
			requireUnavailable(t, err)
		}
		b.srv.Close()
		_, err := b.dir.Resolve(ctx, "acme")
		requireUnavailable(t, err)
	})

	t.Run("AnAnswerThatIsNotAnOrganizationIDIsUnavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.identity.set("acme", "usr_01jaaaaaaaaaaaaaaaaaaaaaaa")
		b.identity.set("blank", "")
		for _, slug := range []string{"acme", "blank"} {
			_, err := b.dir.Resolve(ctx, slug)
			requireUnavailable(t, err)
		}
	})
}
