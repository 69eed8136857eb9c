package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/redisx"
	"svc.dev/libs/telemetry"
	"svc.dev/libs/testkit"
	"svc.dev/libs/web"
	"svc.dev/proto/errs"
	redisadapter "svc.dev/services/gateway/internal/adapters/redis"
	"svc.dev/services/gateway/internal/app"
	"svc.dev/services/gateway/internal/ports/httpapi"
)

// More credentials, beside those of gateway_test.go: a second key of keyIdentity's
// organization, and the session user in another organization.
const (
	apiKey2       = "svc_key_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	otherOrgToken = "Bearer ses_token_other_org"
)

// localLimiter is app.RateLimiter over libs/ratelimit's in-process buckets, on a clock the
// test holds; it records every key it is asked for.
type localLimiter struct {
	buckets *ratelimit.Local
	limit   ratelimit.Limit
	mu      sync.Mutex
	keys    []string
}

func newLocalLimiter(limit ratelimit.Limit, now func() time.Time) *localLimiter {
	return &localLimiter{buckets: ratelimit.NewLocal(now, 1000), limit: limit}
}

func (l *localLimiter) Allow(_ context.Context, id internalauth.Identity) ratelimit.Result {
	key := app.BucketKey(id)
	l.mu.Lock()
	l.keys = append(l.keys, key)
	l.mu.Unlock()
	return l.buckets.Allow(key, l.limit)
}

func (l *localLimiter) Keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// frozenClock only moves when told to.
type frozenClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *frozenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *frozenClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// know teaches the fake resolver one more credential.
func (f *fakeResolver) know(credential string, id internalauth.Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[credential] = app.Resolution{Identity: id}
}

// requireBucket checks the RateLimit-* headers of a guarded answer.
func (r response) requireBucket(t *testing.T, limit, remaining, reset int) {
	t.Helper()
	require.Equal(t, []string{strconv.Itoa(limit)}, r.header.Values("RateLimit-Limit"), "RateLimit-Limit")
	require.Equal(t, []string{strconv.Itoa(remaining)}, r.header.Values("RateLimit-Remaining"), "RateLimit-Remaining")
	require.Equal(t, []string{strconv.Itoa(reset)}, r.header.Values("RateLimit-Reset"), "RateLimit-Reset")
}

// requireNoBucket checks that an answer carries none of the rate limit headers.
func (r response) requireNoBucket(t *testing.T) {
	t.Helper()
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
		require.Empty(t, r.header.Values(h), "header %s", h)
	}
}

// requireRateLimited checks a 429 and returns its retryAfterMs and Retry-After.
func (r response) requireRateLimited(t *testing.T) (retryAfterMs, retryAfter int) {
	t.Helper()
	m := r.requireError(t, http.StatusTooManyRequests, errs.RateLimited)
	ms, ok := m["retryAfterMs"].(float64)
	require.True(t, ok, "retryAfterMs is a number: %s", r.body)
	require.Equal(t, math.Trunc(ms), ms, "retryAfterMs is an integer")
	require.GreaterOrEqual(t, ms, 1.0)
	require.NotEmpty(t, m["message"])
	sec, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is whole seconds: %q", r.header.Get("Retry-After"))
	require.Equal(t, int(math.Ceil(ms/1000)), sec, "Retry-After is retryAfterMs rounded up to seconds")
	require.NotEmpty(t, r.header.Get(web.RequestIDHeader))
	return int(ms), sec
}

func TestGatewayRateLimit(t *testing.T) {
	t.Parallel()

	otherOrgIdentity := internalauth.Identity{
		UserID: sessionIdentity.UserID, Email: sessionIdentity.Email, OrganizationID: "org_3", AuthMode: internalauth.ModeSession,
	}
	key2Identity := internalauth.Identity{OrganizationID: keyIdentity.OrganizationID, AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_2"}

	type limitBundle struct {
		*testBundle
		clock   *frozenClock
		limiter *localLimiter
	}
	// setup serves the gateway with in-process buckets of limit on a frozen clock.
	setup := func(t *testing.T, limit ratelimit.Limit) *limitBundle {
		t.Helper()
		clock := &frozenClock{now: time.Date(2026, 11, 22, 2, 6, 44, 0, time.UTC)}
		limiter := newLocalLimiter(limit, clock.Now)
		b := &limitBundle{testBundle: newTestBundle(t, limiter), clock: clock, limiter: limiter}
		b.resolver.know(apiKey2, key2Identity)
		b.resolver.know(otherOrgToken, otherOrgIdentity)
		return b
	}
	editorHits := func(b *limitBundle) int { return len(b.peers[httpapi.Editor].Hits()) }

	t.Run("SixtyFirstRequestIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(60)) // the default SVC_RATE_LIMIT_PER_MINUTE
		for i := range 60 {
			resp := b.do(t, http.MethodGet, "/api/workflows", nil, "X-Api-Key", apiKey)
			require.Equal(t, http.StatusOK, resp.status, "request %d: %s", i+1, resp.body)
			resp.requireBucket(t, 60, 59-i, i+1) // one token back every second
		}
		resp := b.do(t, http.MethodGet, "/api/workflows", nil, "X-Api-Key", apiKey)
		ms, sec := resp.requireRateLimited(t)
		require.Equal(t, 1000, ms)
		require.Equal(t, 1, sec)
		resp.requireBucket(t, 60, 0, 60)
		require.Equal(t, 60, editorHits(b), "the refused request never reached the service")

		// Another key of the same organization has its own bucket.
		resp = b.do(t, http.MethodGet, "/api/workflows", nil, "X-Api-Key", apiKey2)
		require.Equal(t, http.StatusOK, resp.status)
		resp.requireBucket(t, 60, 59, 1)
		// So has a session of another organization.
		resp = b.do(t, http.MethodGet, "/api/workflows", nil, "Authorization", sessionToken)
		require.Equal(t, http.StatusOK, resp.status)
		resp.requireBucket(t, 60, 59, 1)

		// A second later one token is back, and one only.
		b.clock.Advance(time.Second)
		resp = b.do(t, http.MethodGet, "/api/workflows", nil, "X-Api-Key", apiKey)
		require.Equal(t, http.StatusOK, resp.status)
		resp.requireBucket(t, 60, 0, 60)
		b.do(t, http.MethodGet, "/api/workflows", nil, "X-Api-Key", apiKey).requireRateLimited(t)
		require.Equal(t, 63, editorHits(b))
	})

	t.Run("SamePrincipalInAnotherOrganization", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(3))
		for range 3 {
			require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/runs", nil, "Authorization", sessionToken).status)
		}
		b.do(t, http.MethodGet, "/api/runs", nil, "Authorization", sessionToken).requireRateLimited(t)
		// The cookie is the same session: the same bucket.
		b.do(t, http.MethodGet, "/api/runs", nil, "Cookie", cookie).requireRateLimited(t)
		// The same user acting in another organization is another bucket.
		resp := b.do(t, http.MethodGet, "/api/runs", nil, "Authorization", otherOrgToken)
		require.Equal(t, http.StatusOK, resp.status)
		resp.requireBucket(t, 3, 2, 20)
		require.Equal(t, []string{
			"gw:org_1:usr_1", "gw:org_1:usr_1", "gw:org_1:usr_1", "gw:org_1:usr_1", "gw:org_1:usr_1", "gw:org_3:usr_1",
		}, b.limiter.Keys())
		require.Len(t, b.peers[httpapi.Orchestrator].Hits(), 4)
	})

	t.Run("HeadersOnEveryGuardedAnswer", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, method, path string
			hdr                []string
			status             int
		}{
			{"ServiceOK", http.MethodGet, "/api/schedules", nil, http.StatusOK},
			{"ServiceCreated", http.MethodPost, "/api/workflows", []string{testStatusHeader, "201"}, http.StatusCreated},
			{"ServiceConflict", http.MethodPatch, "/api/workflows/wf_1", []string{testStatusHeader, "409"}, http.StatusConflict},
			{"ServiceNotFound", http.MethodGet, "/api/runs/run_x", []string{testStatusHeader, "404"}, http.StatusNotFound},
			{"ServiceError", http.MethodPost, "/api/admin/tick", []string{testStatusHeader, "500"}, http.StatusInternalServerError},
			{"ServiceSendsItsOwn", http.MethodGet, "/api/connectors", []string{testReplyHeader, "RateLimit-Limit=999", testReplyHeader, "RateLimit-Remaining=998"}, http.StatusOK},
			{"UnknownRoute", http.MethodGet, "/api/nope", nil, http.StatusNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, ratelimit.PerMinute(5))
				resp := b.do(t, tc.method, tc.path, nil, append([]string{"Authorization", sessionToken}, tc.hdr...)...)
				require.Equal(t, tc.status, resp.status, "body %s", resp.body)
				resp.requireBucket(t, 5, 4, 12)
				require.Empty(t, resp.header.Values("Retry-After"))
			})
		}
	})

	t.Run("HeadersWhenTheGatewayAnswers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(5))
		// A chunked body over the limit: 413 from the gateway, after the token was taken.
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/api/workflows",
			bytes.NewReader(bytes.Repeat([]byte("a"), web.MaxBodyBytes+1)))
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		req.Header.Set("Authorization", sessionToken)
		resp := b.serve(t, req)
		resp.requireError(t, http.StatusRequestEntityTooLarge, errs.PayloadTooLarge)
		resp.requireBucket(t, 5, 4, 12)

		// A service that is down: 503 from the gateway.
		b.peers[httpapi.Orchestrator].srv.Close()
		resp = b.do(t, http.MethodGet, "/api/runs", nil, "Authorization", sessionToken)
		resp.requireError(t, http.StatusServiceUnavailable, errs.Unavailable)
		resp.requireBucket(t, 5, 3, 24)
	})

	t.Run("OpenRoutesAreNotLimited", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(1))
		for _, tc := range []struct {
			method, path string
			hdr          []string
		}{
			{http.MethodGet, "/health", nil},
			{http.MethodGet, "/health", []string{"Authorization", sessionToken}},
			{http.MethodPost, "/api/auth/sign-in/email", nil},
			{http.MethodGet, "/api/auth/get-session", []string{"Authorization", sessionToken}},
			{http.MethodPost, "/api/bootstrap", nil},
			{http.MethodPost, "/api/webhooks/acme/github", []string{"X-Api-Key", apiKey}},
		} {
			for range 3 {
				resp := b.do(t, tc.method, tc.path, strings.NewReader(`{}`), tc.hdr...)
				require.Equal(t, http.StatusOK, resp.status, "%s %s: %s", tc.method, tc.path, resp.body)
				resp.requireNoBucket(t)
			}
		}
		require.Empty(t, b.limiter.Keys(), "open routes never touch a bucket")
	})

	t.Run("NoBucketWithoutAnIdentity", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.PerMinute(1))
		for _, hdr := range [][]string{nil, {"Authorization", badToken}, {"Authorization", noOrgToken}} {
			resp := b.do(t, http.MethodGet, "/api/workflows", nil, hdr...)
			require.Equal(t, http.StatusUnauthorized, resp.status, "body %s", resp.body)
			resp.requireNoBucket(t)
		}
		b.resolver.fail(errors.New("identity: connection refused"))
		resp := b.do(t, http.MethodGet, "/api/workflows", nil, "Authorization", sessionToken)
		resp.requireError(t, http.StatusServiceUnavailable, errs.Unavailable)
		resp.requireNoBucket(t)
		require.Empty(t, b.limiter.Keys())
		b.requireNoHits(t)
	})
}

// The gateway over the real limiter: buckets in Redis, in process while Redis is cut.
func TestGatewayRateLimitRedis(t *testing.T) {
	t.Parallel()

	type redisBundle struct {
		*testBundle
		rdb     *redis.Client
		keys    redisx.Keys
		proxy   *testkit.Proxy
		limiter *ratelimit.Limiter
		tel     telemetry.Telemetry
	}
	setupWithOrg := func(t *testing.T, limit, org ratelimit.Limit, timeout time.Duration) *redisBundle {
		t.Helper()
		rdb, keys := testkit.NewRedis(t)
		proxy := testkit.NewProxy(t, rdb.Options().Addr)
		client, err := redisx.Open("redis://"+proxy.Addr()+"/"+strconv.Itoa(rdb.Options().DB), nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
		limiter := ratelimit.NewWithOptions(client, keys, slog.New(slog.DiscardHandler),
			ratelimit.Options{Meter: tel.Meter, Timeout: timeout})
		// As service.NewApplication wires it.
		port := app.CountRefusals(redisadapter.NewRedisRateLimiter(limiter, limit, org), tel.Meter)
		b := &redisBundle{testBundle: newTestBundle(t, port), rdb: rdb, keys: keys, proxy: proxy, limiter: limiter, tel: tel}
		b.resolver.know(apiKey2, internalauth.Identity{OrganizationID: keyIdentity.OrganizationID, AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_2"})
		return b
	}
	setup := func(t *testing.T, limit ratelimit.Limit, timeout time.Duration) *redisBundle {
		t.Helper()
		return setupWithOrg(t, limit, ratelimit.PerMinute(1_000_000), timeout)
	}

	// Issue 21: each API key had a bucket of its own, so an organization's share grew with
	// every key it created. The organization's bucket caps them together.
	t.Run("OrganizationBucketCapsAllItsKeys", func(t *testing.T) {
		t.Parallel()
		b := setupWithOrg(t, ratelimit.PerMinute(3), ratelimit.PerMinute(4), 5*time.Second)
		for i := range 3 {
			resp := b.do(t, http.MethodPost, "/api/workflows/wf_1/run", strings.NewReader(`{}`), "X-Api-Key", apiKey)
			require.Equal(t, http.StatusOK, resp.status, "request %d: %s", i+1, resp.body)
			// The tighter bucket speaks: the key's (3 − i − 1 left) until the organization's
			// is lower.
			require.Equal(t, "3", resp.header.Get("RateLimit-Limit"))
			require.Equal(t, strconv.Itoa(2-i), resp.header.Get("RateLimit-Remaining"))
		}
		resp := b.do(t, http.MethodPost, "/api/workflows/wf_1/run", strings.NewReader(`{}`), "X-Api-Key", apiKey2)
		require.Equal(t, http.StatusOK, resp.status, resp.body)
		require.Equal(t, "4", resp.header.Get("RateLimit-Limit"), "the organization's bucket is the tighter now")
		require.Equal(t, "0", resp.header.Get("RateLimit-Remaining"))
		resp = b.do(t, http.MethodPost, "/api/workflows/wf_1/run", strings.NewReader(`{}`), "X-Api-Key", apiKey2)
		resp.requireError(t, http.StatusTooManyRequests, errs.RateLimited)
		require.Equal(t, "4", resp.header.Get("RateLimit-Limit"))
		require.NotEmpty(t, resp.header.Get("Retry-After"))
		// Another organization is untouched.
		resp = b.do(t, http.MethodPost, "/api/workflows/wf_1/run", strings.NewReader(`{}`), "Authorization", sessionToken)
		require.Equal(t, http.StatusOK, resp.status, resp.body)
		// One round trip per request (one EVALSHA for both buckets).
		require.Zero(t, b.limiter.Fallbacks())
	})

	t.Run("FourthOfThreeIsRefused", func(t *testing.T) {
		t.Parallel()
		// A timeout far above a round trip even on a loaded machine: a call that timed out
		// would be decided in process, not by Redis.
		b := setup(t, ratelimit.PerMinute(3), 5*time.Second)
		for i := range 3 {
			resp := b.do(t, http.MethodPost, "/api/workflows/wf_1/run", strings.NewReader(`{}`), "X-Api-Key", apiKey)
			require.Equal(t, http.StatusOK, resp.status, "request %d: %s", i+1, resp.body)
			require.Equal(t, "3", resp.header.Get("RateLimit-Limit"))
			require.Equal(t, strconv.Itoa(2-i), resp.header.Get("RateLimit-Remaining"))
			reset, err := strconv.Atoi(resp.header.Get("RateLimit-Reset"))
			require.NoError(t, err)
			require.InDelta(t, 20*(i+1), reset, 1)
		}
		resp := b.do(t, http.MethodPost, "/api/workflows/wf_1/run", strings.NewReader(`{}`), "X-Api-Key", apiKey)
		ms, sec := resp.requireRateLimited(t)
		require.LessOrEqual(t, ms, 20_000)
		require.LessOrEqual(t, sec, 20)
		require.Equal(t, "3", resp.header.Get("RateLimit-Limit"))
		require.Equal(t, "0", resp.header.Get("RateLimit-Remaining"))
		reset, err := strconv.Atoi(resp.header.Get("RateLimit-Reset"))
		require.NoError(t, err)
		require.InDelta(t, 60, reset, 1)
		require.Len(t, b.peers[httpapi.Orchestrator].Hits(), 3, "the refused request never reached the service")

		// Another key of the organization, and another organization, still pass.
		resp = b.do(t, http.MethodGet, "/api/runs", nil, "X-Api-Key", apiKey2)
		require.Equal(t, http.StatusOK, resp.status)
		require.Equal(t, "2", resp.header.Get("RateLimit-Remaining"))
		resp = b.do(t, http.MethodGet, "/api/runs", nil, "Authorization", sessionToken)
		require.Equal(t, http.StatusOK, resp.status)
		require.Equal(t, "2", resp.header.Get("RateLimit-Remaining"))

		// The buckets are Redis keys under the deployment's prefix.
		n, err := b.rdb.Exists(t.Context(),
			b.keys.Prefix()+"rate:gw:org_2:key_1", b.keys.Prefix()+"rate:gw:org_2:key_2", b.keys.Prefix()+"rate:gw:org_1:usr_1").Result()
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Zero(t, b.limiter.Fallbacks())

		// Refusals are counted.
		rec := httptest.NewRecorder()
		b.tel.Metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Contains(t, rec.Body.String(), "svc_gateway_rate_limited_total 1\n")
	})

	t.Run("RedisCutKeepsServingAndLimiting", func(t *testing.T) {
		t.Parallel()
		// The production timeout: with Redis refusing connections, the client's own dial
		// retries would take seconds.
		b := setup(t, ratelimit.PerMinute(2), ratelimit.DefaultTimeout)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/schedules", nil, "Authorization", sessionToken).status)
		before := b.limiter.Fallbacks() // 0 unless the first call, which dials, timed out

		b.proxy.Stop()

		// The in-process bucket of this replica starts full and limits alone.
		for i := range 2 {
			resp := b.do(t, http.MethodGet, "/api/schedules", nil, "X-Api-Key", apiKey)
			require.Equal(t, http.StatusOK, resp.status, "request %d: %s", i+1, resp.body)
			require.Equal(t, strconv.Itoa(1-i), resp.header.Get("RateLimit-Remaining"))
		}
		resp := b.do(t, http.MethodGet, "/api/schedules", nil, "X-Api-Key", apiKey)
		resp.requireRateLimited(t)
		require.Equal(t, "0", resp.header.Get("RateLimit-Remaining"))
		require.Len(t, b.peers[httpapi.Scheduler].Hits(), 3)
		require.Equal(t, before+3, b.limiter.Fallbacks())
	})
}
