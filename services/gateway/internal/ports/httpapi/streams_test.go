package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	redisadapter "svc.dev/services/gateway/internal/adapters/redis"
	"svc.dev/services/gateway/internal/app"
)

// deadSlots are stream slots whose Redis cannot be reached: every Take fails, and the
// streams are counted on this replica.
func deadSlots(t *testing.T) app.StreamSlots {
	t.Helper()
	_, keys := testkit.NewRedis(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	return redisadapter.NewRedisStreamSlots(dead, keys, time.Second)
}

func sessionOf(org, user string) internalauth.Identity {
	return internalauth.Identity{UserID: user, OrganizationID: org, AuthMode: internalauth.ModeSession}
}

func keyOf(org, key, creator string) internalauth.Identity {
	return internalauth.Identity{UserID: creator, OrganizationID: org, AuthMode: internalauth.ModeAPIKey, APIKeyID: key}
}

// TestStreamSlotsFallBackToThisReplica: while the shared slots cannot be counted (Redis
// unreachable), the caps still hold, on this replica, and a slot comes back when its
// stream's context ends.
func TestStreamSlotsFallBackToThisReplica(t *testing.T) {
	t.Parallel()
	s := &streams{shared: deadSlots(t), limits: StreamLimitsFor(2), open: map[string]int{}}
	log := slog.New(slog.DiscardHandler)
	id := sessionOf("org_1", "usr_1")

	first, endFirst := context.WithCancel(t.Context())
	defer endFirst()
	second, endSecond := context.WithCancel(t.Context())
	defer endSecond()
	require.Nil(t, s.take(first, log, id))
	require.Nil(t, s.take(second, log, id))
	full := s.take(t.Context(), log, id)
	require.NotNil(t, full, "the cap holds on this replica")
	require.Equal(t, app.StreamsOfPrincipal, full.Scope)
	endFirst()
	require.Eventually(t, func() bool {
		ctx, end := context.WithCancel(t.Context())
		defer end()
		return s.take(ctx, log, id) == nil
	}, 5*time.Second, 5*time.Millisecond, "a stream that ended gives its slot back")
}

// TestStreamCeilingsFallBackToThisReplica (issue 21): while Redis cannot be reached the
// user's and the organization's ceilings hold on this replica too, all or none (a refused
// stream takes no slot under any ceiling), under concurrent opens, and an ended stream gives
// every slot back.
func TestStreamCeilingsFallBackToThisReplica(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	setup := func(t *testing.T) *streams {
		t.Helper()
		return &streams{shared: deadSlots(t), limits: app.StreamLimits{PerPrincipal: 2, PerUser: 3, PerOrganization: 5}, open: map[string]int{}}
	}
	open := func(t *testing.T, s *streams, id internalauth.Identity) (app.StreamScope, context.CancelFunc) {
		t.Helper()
		ctx, end := context.WithCancel(t.Context())
		t.Cleanup(end)
		if full := s.take(ctx, log, id); full != nil {
			end()
			return full.Scope, end
		}
		return "", end
	}

	t.Run("PerUser", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		for _, id := range []internalauth.Identity{sessionOf("org_1", "usr_1"), keyOf("org_2", "key_1", "usr_1"), keyOf("org_2", "key_2", "usr_1")} {
			full, _ := open(t, s, id)
			require.Empty(t, full)
		}
		full, _ := open(t, s, keyOf("org_3", "key_3", "usr_1"))
		require.Equal(t, app.StreamsOfUser, full, "a fresh key of a fresh organization is still the same user's")
		require.Zero(t, s.open["gw:org_3:key_3"], "a refused stream takes no slot under any ceiling")
		require.Zero(t, s.open["gw:org:org_3"])
		full, _ = open(t, s, sessionOf("org_1", "usr_2"))
		require.Empty(t, full, "another user has slots of its own")
	})

	t.Run("PerOrganization", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		for _, id := range []internalauth.Identity{
			sessionOf("org_1", "usr_1"), keyOf("org_1", "key_1", "usr_1"), sessionOf("org_1", "usr_2"),
			keyOf("org_1", "key_2", "usr_2"), keyOf("org_1", "key_3", "usr_3"),
		} {
			full, _ := open(t, s, id)
			require.Empty(t, full)
		}
		full, end := open(t, s, keyOf("org_1", "key_4", "usr_4"))
		require.Equal(t, app.StreamsOfOrganization, full)
		end()
		require.Zero(t, s.open["gw:user:usr_4"], "a refused stream takes no slot under any ceiling")
		full, _ = open(t, s, sessionOf("org_2", "usr_1"))
		require.Empty(t, full, "another organization has slots of its own")
	})

	t.Run("ConcurrentOpens", func(t *testing.T) {
		t.Parallel()
		s := &streams{shared: deadSlots(t), limits: app.StreamLimits{PerPrincipal: 1000, PerUser: 4, PerOrganization: 7}, open: map[string]int{}}
		var (
			wg            sync.WaitGroup
			ofUser, ofOrg atomic.Int64
		)
		for i := range 40 {
			wg.Go(func() {
				id, took := keyOf("org_u"+strconv.Itoa(i), "key_u"+strconv.Itoa(i), "usr_many"), &ofUser
				if i%2 == 1 {
					id, took = keyOf("org_many", "key_o"+strconv.Itoa(i), "usr_o"+strconv.Itoa(i)), &ofOrg
				}
				ctx, end := context.WithCancel(t.Context())
				t.Cleanup(end)
				if s.take(ctx, log, id) == nil {
					took.Add(1)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(4), ofUser.Load(), "the user's ceiling")
		require.Equal(t, int64(7), ofOrg.Load(), "the organization's ceiling")
	})

	t.Run("EndedStreamGivesEverySlotBack", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		full, end := open(t, s, keyOf("org_1", "key_1", "usr_1"))
		require.Empty(t, full)
		end()
		require.Eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.open) == 0
		}, 5*time.Second, 5*time.Millisecond, "every slot of an ended stream is given back")
	})
}

// TestStreamRefusal (issue 21): a stream past the user's or the organization's ceiling is
// refused as one past the principal's: 429 rate_limited with maxStreams, never reaching the
// service.
func TestStreamRefusal(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	g := &Gateway{log: slog.New(slog.DiscardHandler), streams: streams{
		shared: redisadapter.NewRedisStreamSlots(rdb, keys, time.Minute),
		limits: app.StreamLimits{PerPrincipal: 5, PerUser: 1, PerOrganization: 2}, open: map[string]int{},
	}}
	var reached atomic.Int64
	// The service answers at once and holds the stream open until the test ends, so its
	// slots stay taken.
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	service := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	})
	// serve opens a stream of id: nil when it reached the service (and stays open), else the
	// refusal.
	serve := func(id internalauth.Identity) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/api/runs/events", nil)
		before := reached.Load()
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.serveStream(rec, req, id, service)
		}()
		deadline := time.Now().Add(5 * time.Second)
		for {
			select {
			case <-done:
				return rec
			default:
			}
			if reached.Load() > before {
				return nil
			}
			require.True(t, time.Now().Before(deadline), "no answer")
			time.Sleep(time.Millisecond)
		}
	}
	require.Nil(t, serve(keyOf("org_1", "key_1", "usr_1")))
	for _, tc := range []struct {
		id   internalauth.Identity
		max  int
		what string
	}{
		{keyOf("org_2", "key_2", "usr_1"), 1, "user"},
		{sessionOf("org_1", "usr_2"), 2, "organization"},
	} {
		if tc.what == "organization" {
			require.Nil(t, serve(keyOf("org_1", "key_3", "usr_3")))
		}
		before := reached.Load()
		rec := serve(tc.id)
		require.NotNil(t, rec, tc.what)
		require.Equal(t, http.StatusTooManyRequests, rec.Code, tc.what)
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, "rate_limited", body["error"])
		require.InDelta(t, tc.max, body["maxStreams"], 0)
		require.Contains(t, body["message"], "for this "+tc.what)
		require.Equal(t, before, reached.Load(), "a refused stream never reaches the service")
	}
}
