package http

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/services/gateway/internal/adapters/ratelimiter"
)

// TestStreamSlotsFallBackToThisReplica: while the shared slots cannot be counted (Redis
// unreachable), the cap still holds, on this replica, and a slot comes back when its
// stream's context ends.
func TestStreamSlotsFallBackToThisReplica(t *testing.T) {
	t.Parallel()
	_, keys := testkit.NewRedis(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	s := &streams{shared: ratelimiter.NewRedisStreamSlots(dead, keys, time.Second), max: 2, open: map[string]int{}}
	log := slog.New(slog.DiscardHandler)

	first, endFirst := context.WithCancel(t.Context())
	defer endFirst()
	second, endSecond := context.WithCancel(t.Context())
	defer endSecond()
	require.True(t, s.take(first, log, "gw:org_1:usr_1"))
	require.True(t, s.take(second, log, "gw:org_1:usr_1"))
	require.False(t, s.take(t.Context(), log, "gw:org_1:usr_1"), "the cap holds on this replica")
	endFirst()
	require.Eventually(t, func() bool {
		ctx, end := context.WithCancel(t.Context())
		defer end()
		return s.take(ctx, log, "gw:org_1:usr_1")
	}, 5*time.Second, 5*time.Millisecond, "a stream that ended gives its slot back")
}
