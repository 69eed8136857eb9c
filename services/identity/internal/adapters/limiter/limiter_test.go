package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
	"svc.dev/services/identity/internal/adapters/limiter"
)

func TestAttemptLimiter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	local := ratelimit.NewLocal(func() time.Time { return now }, 100)
	l := limiter.New(localAllower{local}, limiter.SignInAttempts())
	for i := range 10 {
		ok, _ := l.Allow(context.Background(), "sign-in:ip:a")
		require.True(t, ok, "attempt %d", i+1)
	}
	ok, retry := l.Allow(context.Background(), "sign-in:ip:a")
	require.False(t, ok)
	require.Equal(t, 6*time.Second, retry, "one attempt back every 6 s")
	ok, _ = l.Allow(context.Background(), "sign-in:ip:b")
	require.True(t, ok)
}

type localAllower struct{ l *ratelimit.Local }

func (a localAllower) Allow(_ context.Context, key string, lim ratelimit.Limit) ratelimit.Result {
	return a.l.Allow(key, lim)
}
