package redis_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
	redisadapter "svc.dev/services/gateway/internal/adapters/redis"
	"svc.dev/services/gateway/internal/app"
)

// TestRedisStreamSlots: two gateways sharing Redis share each principal's cap; a stream's
// slot is given back when it ends; a slot whose gateway died (its lease no longer renewed)
// stops counting when the lease ends; a slot that is held outlives several leases.
func TestRedisStreamSlots(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	const lease = 300 * time.Millisecond
	a := redisadapter.NewRedisStreamSlots(rdb, keys, lease)
	b := redisadapter.NewRedisStreamSlots(rdb, keys, lease)
	take := func(s *redisadapter.RedisStreamSlots, key string) (bool, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		full, err := s.Take(ctx, []app.StreamCeiling{{Key: key, Max: 3}})
		require.NoError(t, err)
		ok := full < 0
		if !ok {
			cancel()
		}
		return ok, cancel
	}

	ok1, end1 := take(a, "gw:org_1:usr_1")
	ok2, end2 := take(a, "gw:org_1:usr_1")
	ok3, end3 := take(b, "gw:org_1:usr_1")
	require.True(t, ok1 && ok2 && ok3)
	defer end2()
	defer end3()
	full, _ := take(b, "gw:org_1:usr_1")
	require.False(t, full, "the cap holds across gateways")
	full, _ = take(a, "gw:org_1:usr_1")
	require.False(t, full)
	other, endOther := take(a, "gw:org_1:usr_2")
	require.True(t, other, "another principal has slots of its own")
	endOther()

	// Held streams outlive their lease: they are renewed.
	deadline := time.Now().Add(3 * lease)
	for time.Now().Before(deadline) {
		full, _ = take(b, "gw:org_1:usr_1")
		require.False(t, full, "a held slot must not expire while its stream is open")
		time.Sleep(lease / 4)
	}

	// eventuallyTakes waits until s can take a slot of key (and gives it back).
	eventuallyTakes := func(s *redisadapter.RedisStreamSlots, key, why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			ok, end := take(s, key)
			if ok {
				end()
			}
			return ok
		}, 5*time.Second, 10*time.Millisecond, why)
	}
	end1()
	eventuallyTakes(b, "gw:org_1:usr_1", "a stream that ends gives its slot back")

	// A gateway that died: its member is neither renewed nor removed, and stops counting when
	// its lease ends (Redis's clock).
	set := keys.Key(redisadapter.StreamSlotsKey + "gw:org_1:usr_3")
	now, err := rdb.Time(t.Context()).Result()
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, rdb.ZAdd(t.Context(), set, redis.Z{Score: float64(now.Add(lease).UnixMilli()), Member: "dead-" + strconv.Itoa(i)}).Err())
	}
	full, _ = take(a, "gw:org_1:usr_3")
	require.False(t, full, "the dead gateway's slots count until their lease ends")
	eventuallyTakes(a, "gw:org_1:usr_3", "a dead gateway's slots end with their lease")
}

// TestRedisStreamSlotsWithoutRedis: slots that cannot be counted are an error, not a refusal.
func TestRedisStreamSlotsWithoutRedis(t *testing.T) {
	t.Parallel()
	_, keys := testkit.NewRedis(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	_, err := redisadapter.NewRedisStreamSlots(dead, keys, time.Second).Take(t.Context(),
		[]app.StreamCeiling{{Key: "gw:org_1:usr_1", Max: 3}, {Key: "gw:org:org_1", Max: 3}})
	require.Error(t, err)
}

// TestRedisStreamSlotsCeilings (issue 21): a stream takes a slot under each of its ceilings
// (principal, user, organization), all or none, so that more API keys or organizations do not
// multiply a user's or an organization's open streams; concurrent opens on two gateways never
// exceed a ceiling; a stream that ends gives every slot back.
func TestRedisStreamSlotsCeilings(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		rdb  redis.UniversalClient
		keys redisx.Keys
		a, b *redisadapter.RedisStreamSlots
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		rdb, keys := testkit.NewRedis(t)
		return &testBundle{rdb: rdb, keys: keys,
			a: redisadapter.NewRedisStreamSlots(rdb, keys, time.Minute), b: redisadapter.NewRedisStreamSlots(rdb, keys, time.Minute)}
	}
	limits := app.StreamLimits{PerPrincipal: 2, PerUser: 3, PerOrganization: 5}
	session := func(org, user string) internalauth.Identity {
		return internalauth.Identity{UserID: user, OrganizationID: org, AuthMode: internalauth.ModeSession}
	}
	key := func(org, key, creator string) internalauth.Identity {
		return internalauth.Identity{UserID: creator, OrganizationID: org, AuthMode: internalauth.ModeAPIKey, APIKeyID: key}
	}
	// take opens a stream of id on s; it answers the full ceiling's scope ("" when taken) and
	// the stream's end.
	take := func(t *testing.T, s *redisadapter.RedisStreamSlots, id internalauth.Identity) (app.StreamScope, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		ceilings := app.StreamCeilings(id, limits)
		full, err := s.Take(ctx, ceilings)
		require.NoError(t, err)
		if full >= 0 {
			cancel()
			return ceilings[full].Scope, cancel
		}
		return "", cancel
	}
	count := func(t *testing.T, b *testBundle, ceiling string) int64 {
		t.Helper()
		n, err := b.rdb.ZCard(t.Context(), b.keys.Key(redisadapter.StreamSlotsKey+ceiling)).Result()
		require.NoError(t, err)
		return n
	}

	t.Run("PerUserAcrossKeysAndOrganizations", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The user's session in one organization and two keys it created in another: three
		// principals of two organizations, one user.
		for _, id := range []internalauth.Identity{session("org_1", "usr_1"), key("org_2", "key_1", "usr_1"), key("org_2", "key_2", "usr_1")} {
			full, _ := take(t, b.a, id)
			require.Empty(t, full)
		}
		full, _ := take(t, b.b, key("org_3", "key_3", "usr_1"))
		require.Equal(t, app.StreamsOfUser, full, "a fresh key of a fresh organization is still the same user's")
		full, _ = take(t, b.b, session("org_1", "usr_1"))
		require.Equal(t, app.StreamsOfUser, full)
		require.Zero(t, count(t, b, "gw:org_3:key_3"), "a refused stream takes no slot under any ceiling")
		require.Zero(t, count(t, b, "gw:org:org_3"))
		require.Equal(t, int64(1), count(t, b, "gw:org_1:usr_1"))
		full, _ = take(t, b.b, session("org_1", "usr_2"))
		require.Empty(t, full, "another user of the organization has slots of its own")
	})

	t.Run("PerOrganizationAcrossPrincipals", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Five principals of three users, one organization.
		for i, id := range []internalauth.Identity{
			session("org_1", "usr_1"), key("org_1", "key_1", "usr_1"), session("org_1", "usr_2"),
			key("org_1", "key_2", "usr_2"), key("org_1", "key_3", "usr_3"),
		} {
			full, _ := take(t, []*redisadapter.RedisStreamSlots{b.a, b.b}[i%2], id)
			require.Empty(t, full)
		}
		full, _ := take(t, b.a, key("org_1", "key_4", "usr_4"))
		require.Equal(t, app.StreamsOfOrganization, full, "a fresh key of a fresh user is still the organization's")
		require.Zero(t, count(t, b, "gw:user:usr_4"), "a refused stream takes no slot under any ceiling")
		full, _ = take(t, b.b, session("org_2", "usr_1"))
		require.Empty(t, full, "another organization has slots of its own")
	})

	t.Run("KeyWithoutCreator", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A key whose creator was deleted resolves with no user: its principal's and its
		// organization's ceilings hold it.
		orphan := key("org_1", "key_1", "")
		require.Len(t, app.StreamCeilings(orphan, limits), 2)
		for range 2 {
			full, _ := take(t, b.a, orphan)
			require.Empty(t, full)
		}
		full, _ := take(t, b.a, orphan)
		require.Equal(t, app.StreamsOfPrincipal, full)
	})

	t.Run("ConcurrentOpensNeverExceedACeiling", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		loose := app.StreamLimits{PerPrincipal: 1000, PerUser: 4, PerOrganization: 7}
		// 40 opens at once on two gateways: 20 of one user (20 keys over 20 organizations),
		// 20 of an organization (20 keys of 20 users).
		var (
			wg                  sync.WaitGroup
			ofUser, ofOrg, errd atomic.Int64
		)
		for i := range 40 {
			wg.Go(func() {
				id := key("org_u"+strconv.Itoa(i), "key_u"+strconv.Itoa(i), "usr_many")
				took := &ofUser
				if i%2 == 1 {
					id, took = key("org_many", "key_o"+strconv.Itoa(i), "usr_o"+strconv.Itoa(i)), &ofOrg
				}
				ctx, cancel := context.WithCancel(t.Context())
				t.Cleanup(cancel)
				full, err := []*redisadapter.RedisStreamSlots{b.a, b.b}[i%2].Take(ctx, app.StreamCeilings(id, loose))
				if err != nil {
					errd.Add(1)
					return
				}
				if full < 0 {
					took.Add(1)
				}
			})
		}
		wg.Wait()
		require.Zero(t, errd.Load())
		require.Equal(t, int64(4), ofUser.Load(), "the user's ceiling")
		require.Equal(t, int64(7), ofOrg.Load(), "the organization's ceiling")
		require.Equal(t, int64(4), count(t, b, "gw:user:usr_many"))
		require.Equal(t, int64(7), count(t, b, "gw:org:org_many"))
	})

	t.Run("EndedStreamGivesEverySlotBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := key("org_1", "key_1", "usr_1")
		full, end := take(t, b.a, id)
		require.Empty(t, full)
		for _, set := range []string{"gw:org_1:key_1", "gw:user:usr_1", "gw:org:org_1"} {
			require.Equal(t, int64(1), count(t, b, set), set)
		}
		end()
		require.Eventually(t, func() bool {
			return count(t, b, "gw:org_1:key_1")+count(t, b, "gw:user:usr_1")+count(t, b, "gw:org:org_1") == 0
		}, 5*time.Second, 5*time.Millisecond, "every slot of an ended stream is given back")
	})
}
