package app_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/proto/errs"
	"svc.dev/services/gateway/internal/app"
)

type fakeEpoch struct {
	mu    sync.Mutex
	epoch int64
	err   error
	reads int
}

func (f *fakeEpoch) Epoch(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.epoch, f.err
}

func (f *fakeEpoch) set(epoch int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch, f.err = epoch, err
}

type countingResolver struct {
	mu    sync.Mutex
	calls int
	res   app.Resolution
	err   error
}

func (c *countingResolver) Resolve(context.Context, app.Credentials) (app.Resolution, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.res, c.err
}

func (c *countingResolver) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

type countingLimiter struct {
	mu   sync.Mutex
	keys []string
}

func (l *countingLimiter) Allow(_ context.Context, id internalauth.Identity) ratelimit.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, app.BucketKey(id))
	return ratelimit.Result{Allowed: true, Limit: 60, Remaining: 59}
}

var (
	ada   = internalauth.Identity{UserID: "usr_1", Email: "ada@example.com", OrganizationID: "org_1", AuthMode: internalauth.ModeSession}
	creds = app.Credentials{Authorization: "Bearer tok", ClientIP: "127.0.0.1"}
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup(ttl time.Duration) (*app.CachingResolver, *countingResolver, *fakeEpoch, *clock) {
	next := &countingResolver{res: app.Resolution{Identity: ada}}
	ep := &fakeEpoch{epoch: 7}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	return app.NewCachingResolver(next, ep, ttl, 3, clk.now), next, ep, clk
}

func TestCachingResolverHitAndMiss(t *testing.T) {
	c, next, ep, _ := setup(5 * time.Second)
	ctx := context.Background()
	for range 3 {
		res, err := c.Resolve(ctx, creds)
		require.NoError(t, err)
		require.Equal(t, ada, res.Identity)
	}
	require.Equal(t, 1, next.n(), "first a miss, then hits")
	require.Equal(t, 3, ep.reads, "the epoch is read on every request")

	// Other credentials are another entry; the client address is not part of the key.
	_, err := c.Resolve(ctx, app.Credentials{APIKey: "svc_x"})
	require.NoError(t, err)
	require.Equal(t, 2, next.n())
	_, err = c.Resolve(ctx, app.Credentials{Authorization: "Bearer tok", ClientIP: "10.0.0.1"})
	require.NoError(t, err)
	require.Equal(t, 2, next.n())
}

func TestCachingResolverEpochMovedReResolves(t *testing.T) {
	c, next, ep, _ := setup(5 * time.Second)
	ctx := context.Background()
	_, err := c.Resolve(ctx, creds)
	require.NoError(t, err)
	ep.set(8, nil) // a sign-out, say
	next.res = app.Resolution{Rejection: errs.Unauthorized, Message: "no session"}
	res, err := c.Resolve(ctx, creds)
	require.NoError(t, err)
	require.Equal(t, errs.Unauthorized, res.Rejection, "the very next request fails")
	require.Equal(t, 2, next.n())
	// Rejections are never cached.
	res, err = c.Resolve(ctx, creds)
	require.NoError(t, err)
	require.Equal(t, errs.Unauthorized, res.Rejection)
	require.Equal(t, 3, next.n())
	require.Zero(t, c.Len())
}

func TestCachingResolverEpochMovedSameIdentityIsCachedAgain(t *testing.T) {
	c, next, ep, _ := setup(5 * time.Second)
	ctx := context.Background()
	_, _ = c.Resolve(ctx, creds)
	ep.set(8, nil)
	_, _ = c.Resolve(ctx, creds)
	_, _ = c.Resolve(ctx, creds)
	require.Equal(t, 2, next.n(), "re-resolved once, then cached under epoch 8")
}

func TestCachingResolverExpiry(t *testing.T) {
	c, next, _, clk := setup(5 * time.Second)
	ctx := context.Background()
	_, _ = c.Resolve(ctx, creds)
	clk.t = clk.t.Add(4 * time.Second)
	_, _ = c.Resolve(ctx, creds)
	require.Equal(t, 1, next.n())
	clk.t = clk.t.Add(time.Second)
	_, _ = c.Resolve(ctx, creds)
	require.Equal(t, 2, next.n(), "the TTL is over")

	// A session expiring sooner than the TTL bounds the entry.
	next.res = app.Resolution{Identity: ada, ExpiresAt: clk.t.Add(time.Second)}
	other := app.Credentials{Cookie: "svc.session_token=x"}
	_, _ = c.Resolve(ctx, other)
	require.Equal(t, 3, next.n())
	clk.t = clk.t.Add(999 * time.Millisecond)
	_, _ = c.Resolve(ctx, other)
	require.Equal(t, 3, next.n())
	clk.t = clk.t.Add(time.Millisecond)
	_, _ = c.Resolve(ctx, other)
	require.Equal(t, 4, next.n(), "never past the session's expiry")

	// Already expired: not stored.
	next.res = app.Resolution{Identity: ada, ExpiresAt: clk.t}
	third := app.Credentials{APIKey: "svc_y"}
	_, _ = c.Resolve(ctx, third)
	_, _ = c.Resolve(ctx, third)
	require.Equal(t, 6, next.n())
}

func TestCachingResolverEpochErrorMeansNoCache(t *testing.T) {
	c, next, ep, _ := setup(5 * time.Second)
	ctx := context.Background()
	_, _ = c.Resolve(ctx, creds) // cached under epoch 7
	ep.set(7, errors.New("redis down"))
	for i := range 3 {
		res, err := c.Resolve(ctx, creds)
		require.NoError(t, err)
		require.Equal(t, ada, res.Identity)
		require.Equal(t, 2+i, next.n(), "every request is resolved while the epoch cannot be read")
	}
	require.Zero(t, c.Len(), "nothing is stored without an epoch")
	ep.set(7, nil)
	_, _ = c.Resolve(ctx, creds)
	_, _ = c.Resolve(ctx, creds)
	require.Equal(t, 5, next.n())
}

func TestCachingResolverRejectionsAndErrorsNeverCached(t *testing.T) {
	c, next, _, _ := setup(5 * time.Second)
	ctx := context.Background()
	next.res = app.Resolution{Rejection: errs.NoActiveOrganization}
	_, _ = c.Resolve(ctx, creds)
	_, _ = c.Resolve(ctx, creds)
	require.Equal(t, 2, next.n())
	next.res, next.err = app.Resolution{Identity: ada}, errors.New("identity down")
	_, err := c.Resolve(ctx, creds)
	require.Error(t, err)
	require.Zero(t, c.Len())
}

func TestCachingResolverEvictsOldest(t *testing.T) {
	c, next, _, _ := setup(5 * time.Second)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d"} {
		_, _ = c.Resolve(ctx, app.Credentials{APIKey: k})
	}
	require.Equal(t, 3, c.Len())
	_, _ = c.Resolve(ctx, app.Credentials{APIKey: "d"})
	require.Equal(t, 4, next.n(), "d is cached")
	_, _ = c.Resolve(ctx, app.Credentials{APIKey: "a"})
	require.Equal(t, 5, next.n(), "a, the oldest, was evicted")
}

func TestCachingResolverTakesOneToken(t *testing.T) {
	c, next, ep, _ := setup(5 * time.Second)
	ctx := context.Background()
	lim := &countingLimiter{}
	for range 2 { // a miss, then a hit
		res, taken, err := c.ResolveAndAllow(ctx, creds, lim)
		require.NoError(t, err)
		require.Equal(t, ada, res.Identity)
		require.NotNil(t, taken)
		require.True(t, taken.Allowed)
	}
	require.Equal(t, []string{"gw:org_1:usr_1", "gw:org_1:usr_1"}, lim.keys)

	// The epoch moved and the session now has another organization: the token taken for the
	// old one is lost, one is taken from the new bucket.
	ep.set(9, nil)
	moved := ada
	moved.OrganizationID = "org_2"
	next.res = app.Resolution{Identity: moved}
	res, taken, err := c.ResolveAndAllow(ctx, creds, lim)
	require.NoError(t, err)
	require.Equal(t, moved, res.Identity)
	require.NotNil(t, taken)
	require.Equal(t, []string{"gw:org_1:usr_1", "gw:org_1:usr_1", "gw:org_1:usr_1", "gw:org_2:usr_1"}, lim.keys)

	// A rejection takes no token of its own and returns none.
	c2, next2, _, _ := setup(5 * time.Second)
	next2.res = app.Resolution{Rejection: errs.Unauthorized}
	lim2 := &countingLimiter{}
	_, taken, err = c2.ResolveAndAllow(ctx, creds, lim2)
	require.NoError(t, err)
	require.Nil(t, taken)
	require.Empty(t, lim2.keys)
}
