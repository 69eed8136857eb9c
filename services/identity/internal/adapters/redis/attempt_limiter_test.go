package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
	"svc.dev/services/identity/internal/adapters/redis"
	"svc.dev/services/identity/internal/app/port"
)

func TestAttemptLimiter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	local := ratelimit.NewLocal(func() time.Time { return now }, 100)
	l := redis.New(localAllower{local}, redis.SignInAttempts())
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

func TestLimits(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ls := redis.Limits(localAllower{ratelimit.NewLocal(func() time.Time { return now }, 1000)})
	for name, tc := range map[string]struct {
		l   port.AttemptLimiter
		max int
	}{
		"SignIn": {ls.SignIn, 10}, "SignUp": {ls.SignUp, 30}, "PasswordReset": {ls.PasswordReset, 10}, "ChangePassword": {ls.ChangePassword, 10},
	} {
		for i := range tc.max {
			ok, _ := tc.l.Allow(context.Background(), name)
			require.True(t, ok, "%s attempt %d", name, i+1)
		}
		ok, _ := tc.l.Allow(context.Background(), name)
		require.False(t, ok, name)
	}
}

type localAllower struct{ l *ratelimit.Local }

func (a localAllower) Allow(_ context.Context, key string, lim ratelimit.Limit) ratelimit.Result {
	return a.l.Allow(key, lim)
}
