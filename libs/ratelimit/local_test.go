package ratelimit_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/ratelimit"
)

// clock is a hand-moved clock for the in-process buckets.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestLocal(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		clock  *clock
		bucket *ratelimit.Local
	}
	setup := func(t *testing.T, maxKeys int) *testBundle {
		t.Helper()
		c := &clock{now: time.Date(2026, 11, 22, 2, 6, 44, 0, time.UTC)}
		return &testBundle{clock: c, bucket: ratelimit.NewLocal(c.Now, maxKeys)}
	}

	t.Run("CapacityThenRefusal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		lim := ratelimit.PerMinute(3)
		for i, want := range []ratelimit.Result{
			{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 20 * time.Second},
			{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 40 * time.Second},
			{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 60 * time.Second},
			{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 20 * time.Second, ResetAfter: 60 * time.Second},
			{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 20 * time.Second, ResetAfter: 60 * time.Second},
		} {
			require.Equal(t, want, b.bucket.Allow("k", lim), "call %d", i+1)
		}
	})

	t.Run("SixtyFirstOfSixtyPerMinute", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		lim := ratelimit.PerMinute(60)
		for i := range 60 {
			res := b.bucket.Allow("k", lim)
			require.True(t, res.Allowed, "call %d", i+1)
			require.Equal(t, 59-i, res.Remaining)
		}
		res := b.bucket.Allow("k", lim)
		require.False(t, res.Allowed)
		require.Equal(t, time.Second, res.RetryAfter)
		require.Equal(t, time.Minute, res.ResetAfter)
	})

	t.Run("RefillsOneTokenPerInterval", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		lim := ratelimit.PerMinute(3) // one token every 20 s
		for range 3 {
			require.True(t, b.bucket.Allow("k", lim).Allowed)
		}
		b.clock.Advance(19 * time.Second)
		res := b.bucket.Allow("k", lim)
		require.False(t, res.Allowed)
		require.Equal(t, time.Second, res.RetryAfter)

		b.clock.Advance(time.Second)
		res = b.bucket.Allow("k", lim)
		require.True(t, res.Allowed)
		require.Equal(t, 0, res.Remaining)
		require.False(t, b.bucket.Allow("k", lim).Allowed)

		b.clock.Advance(time.Minute) // full again
		res = b.bucket.Allow("k", lim)
		require.Equal(t, ratelimit.Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 20 * time.Second}, res)
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		lim := ratelimit.PerMinute(2)
		require.True(t, b.bucket.Allow("a", lim).Allowed)
		require.True(t, b.bucket.Allow("a", lim).Allowed)
		require.False(t, b.bucket.Allow("a", lim).Allowed)
		res := b.bucket.Allow("b", lim)
		require.True(t, res.Allowed)
		require.Equal(t, 1, res.Remaining)
	})

	t.Run("BurstAboveRate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		lim := ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 5}
		for range 5 {
			require.True(t, b.bucket.Allow("k", lim).Allowed)
		}
		res := b.bucket.Allow("k", lim)
		require.False(t, res.Allowed)
		require.Equal(t, time.Second, res.RetryAfter)
		require.Equal(t, 5*time.Second, res.ResetAfter)
	})

	t.Run("ConcurrentCallersShareOneBucket", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		lim := ratelimit.PerMinute(50)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			allowed int
		)
		for range 200 {
			wg.Go(func() {
				if b.bucket.Allow("k", lim).Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, 50, allowed)
	})

	t.Run("FullBucketsAreSwept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1000)
		lim := ratelimit.PerMinute(10)
		for i := range 20 {
			b.bucket.Allow("k"+strconv.Itoa(i), lim)
		}
		require.Equal(t, 20, b.bucket.Len())
		b.clock.Advance(time.Minute) // every bucket refilled: they hold nothing worth keeping
		b.bucket.Allow("fresh", lim)
		require.Equal(t, 1, b.bucket.Len())
	})

	t.Run("BucketsInUseAreNotSwept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1000)
		slow := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 2}
		b.bucket.Allow("slow", slow)
		b.bucket.Allow("slow", slow)
		b.clock.Advance(time.Minute)
		b.bucket.Allow("other", slow)
		require.Equal(t, 2, b.bucket.Len())
		require.False(t, b.bucket.Allow("slow", slow).Allowed, "the spent bucket was kept")
	})

	// At capacity with every bucket in use a new key is refused until the first bucket is
	// full again and its place frees up; memory never grows past maxKeys.
	t.Run("MemoryIsBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 50)
		lim := ratelimit.PerMinute(10) // one token back every 6 s
		for i := range 1000 {
			res := b.bucket.Allow("k"+strconv.Itoa(i), lim)
			require.Equal(t, i < 50, res.Allowed, "key %d", i)
			if !res.Allowed {
				require.Equal(t, 6*time.Second, res.RetryAfter, "when the first bucket is full again")
			}
			require.LessOrEqual(t, b.bucket.Len(), 50)
		}
		b.clock.Advance(6 * time.Second)
		require.True(t, b.bucket.Allow("late", lim).Allowed, "full buckets made room")
		require.Equal(t, 1, b.bucket.Len())
	})

	// A flood of new keys must not push an exhausted bucket out: that would hand the client
	// it limits a full bucket (an attacker evicting a victim's sign-in bucket while Redis is
	// down). Only full buckets make room; with none, a new key is refused, not admitted.
	t.Run("AnExhaustedBucketIsNeverForgotten", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 10)
		lim := ratelimit.PerMinute(3)
		for range 3 {
			require.True(t, b.bucket.Allow("target", lim).Allowed)
		}
		require.False(t, b.bucket.Allow("target", lim).Allowed)
		for i := range 1000 {
			b.bucket.Allow("flood"+strconv.Itoa(i), lim)
			require.LessOrEqual(t, b.bucket.Len(), 10)
		}
		res := b.bucket.Allow("target", lim)
		require.False(t, res.Allowed, "the exhausted bucket was forgotten")
		require.Equal(t, 20*time.Second, res.RetryAfter)
	})

	t.Run("InvalidLimitPanics", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 10)
		for _, lim := range []ratelimit.Limit{
			{},
			{Rate: 0, Period: time.Minute, Burst: 1},
			{Rate: 1, Period: time.Minute, Burst: 0},
			{Rate: 1, Period: 0, Burst: 1},
			{Rate: 10, Period: time.Nanosecond, Burst: 1},
		} {
			require.Panics(t, func() { b.bucket.Allow("k", lim) }, "%+v", lim)
		}
	})

	t.Run("ConstructorPanicsOnMissingDependency", func(t *testing.T) {
		t.Parallel()
		require.PanicsWithValue(t, "nil clock", func() { ratelimit.NewLocal(nil, 10) })
		require.PanicsWithValue(t, "maxKeys must be positive", func() { ratelimit.NewLocal(time.Now, 0) })
	})
}

func TestPerMinute(t *testing.T) {
	t.Parallel()
	require.Equal(t, ratelimit.Limit{Rate: 60, Period: time.Minute, Burst: 60}, ratelimit.PerMinute(60))
}
