package ratelimit_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc.dev/libs/ratelimit"
	"svc.dev/libs/redisx"
	"svc.dev/libs/telemetry"
	"svc.dev/libs/testkit"
)

// commandCounter is a client hook that counts the commands the limiter sends.
type commandCounter struct {
	mu    sync.Mutex
	names []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *commandCounter) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

// Scripts is how many script calls were sent; connection set-up (HELLO) is not counted.
func (c *commandCounter) Scripts() int {
	n := 0
	for _, name := range c.Names() {
		if name == "evalsha" || name == "eval" {
			n++
		}
	}
	return n
}

// logLines is a concurrency-safe JSON log sink.
type logLines struct{ testkit.SyncBuffer }

// Messages returns the msg of every line at level or above.
func (l *logLines) Messages(t *testing.T, level slog.Level) []string {
	t.Helper()
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var rec struct {
			Level slog.Level `json:"level"`
			Msg   string     `json:"msg"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec.Level >= level {
			out = append(out, rec.Msg)
		}
	}
	return out
}

func TestLimiter(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		rdb     *redis.Client // straight to Redis, for looking at keys
		keys    redisx.Keys
		proxy   *testkit.Proxy
		client  *redis.Client // the limiter's, through the proxy
		counter *commandCounter
		logs    *logLines
		tel     telemetry.Telemetry
		limiter *ratelimit.Limiter
	}
	setup := func(t *testing.T, opts ratelimit.Options) *testBundle {
		t.Helper()
		rdb, keys := testkit.NewRedis(t)
		proxy := testkit.NewProxy(t, rdb.Options().Addr)
		client, err := redisx.Open("redis://"+proxy.Addr()+"/"+strconv.Itoa(rdb.Options().DB), nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		counter := &commandCounter{}
		client.AddHook(counter)
		logs := &logLines{}
		tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
		opts.Meter = tel.Meter
		if opts.Timeout == 0 {
			// Far above a round trip even on a loaded CI machine: these tests are about what
			// Redis decides, and a call that timed out would be decided in process instead.
			opts.Timeout = 5 * time.Second
		}
		log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		return &testBundle{
			rdb: rdb, keys: keys, proxy: proxy, client: client, counter: counter, logs: logs, tel: tel,
			limiter: ratelimit.NewWithOptions(client, keys, log, opts),
		}
	}

	t.Run("RefusesTheCallPastCapacity", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.Options{})
		lim := ratelimit.PerMinute(3)
		for i := range 3 {
			res := b.limiter.Allow(t.Context(), "k", lim)
			require.True(t, res.Allowed, "call %d", i+1)
			require.Equal(t, 2-i, res.Remaining)
			require.Equal(t, 3, res.Limit)
			require.Zero(t, res.RetryAfter)
			require.Greater(t, res.ResetAfter, time.Duration(i)*20*time.Second)
		}
		res := b.limiter.Allow(t.Context(), "k", lim)
		require.False(t, res.Allowed)
		require.Equal(t, 0, res.Remaining)
		require.Equal(t, 3, res.Limit)
		require.Greater(t, res.RetryAfter, time.Duration(0))
		require.LessOrEqual(t, res.RetryAfter, 20*time.Second)
		require.Greater(t, res.ResetAfter, 40*time.Second)
		require.LessOrEqual(t, res.ResetAfter, time.Minute)
		require.Zero(t, b.limiter.Fallbacks(), "Redis answered every call")
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.Options{})
		lim := ratelimit.PerMinute(2)
		require.True(t, b.limiter.Allow(t.Context(), "org_1:key_1", lim).Allowed)
		require.True(t, b.limiter.Allow(t.Context(), "org_1:key_1", lim).Allowed)
		require.False(t, b.limiter.Allow(t.Context(), "org_1:key_1", lim).Allowed)
		res := b.limiter.Allow(t.Context(), "org_1:key_2", lim)
		require.True(t, res.Allowed)
		require.Equal(t, 1, res.Remaining)
		require.True(t, b.limiter.Allow(t.Context(), "org_2:key_1", lim).Allowed)
	})

	t.Run("KeysLiveUnderThePrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.Options{})
		b.limiter.Allow(t.Context(), "gw:org_1:usr_1", ratelimit.PerMinute(5))
		got, err := b.rdb.Keys(t.Context(), b.keys.Prefix()+"*").Result()
		require.NoError(t, err)
		require.Equal(t, []string{b.keys.Prefix() + "rate:gw:org_1:usr_1"}, got)
		ttl, err := b.rdb.TTL(t.Context(), got[0]).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0), "a bucket expires once it would be full")
		require.LessOrEqual(t, ttl, 12*time.Second)
	})

	t.Run("OneRoundTripPerCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.Options{})
		lim := ratelimit.PerMinute(100)
		b.limiter.Allow(t.Context(), "warm", lim) // may load the script (EVALSHA, then EVAL)
		before := len(b.counter.Names())
		for i := range 20 {
			b.limiter.Allow(t.Context(), "k"+strconv.Itoa(i%3), lim)
		}
		names := b.counter.Names()[before:]
		require.Len(t, names, 20)
		for _, n := range names {
			require.Equal(t, "evalsha", n)
		}
	})

	t.Run("AgreesWithLocal", func(t *testing.T) {
		t.Parallel()
		// The same burst against Redis and the in-process store decides the same way.
		b := setup(t, ratelimit.Options{})
		local := ratelimit.NewLocal(time.Now, 10)
		lim := ratelimit.PerMinute(5)
		for i := range 7 {
			remote := b.limiter.Allow(t.Context(), "k", lim)
			mem := local.Allow("k", lim)
			require.Equal(t, mem.Allowed, remote.Allowed, "call %d", i+1)
			require.Equal(t, mem.Remaining, remote.Remaining, "call %d", i+1)
			require.Equal(t, mem.Limit, remote.Limit, "call %d", i+1)
			require.InDelta(t, mem.RetryAfter.Seconds(), remote.RetryAfter.Seconds(), 1, "call %d", i+1)
			require.InDelta(t, mem.ResetAfter.Seconds(), remote.ResetAfter.Seconds(), 1, "call %d", i+1)
		}
	})

	t.Run("RedisCutThenBack", func(t *testing.T) {
		t.Parallel()
		const openFor = 300 * time.Millisecond
		// The production timeout: with Redis refusing connections, the client's own dial
		// retries would take seconds.
		b := setup(t, ratelimit.Options{OpenFor: openFor, Timeout: ratelimit.DefaultTimeout})
		lim := ratelimit.PerMinute(3)
		require.True(t, b.limiter.Allow(t.Context(), "before", lim).Allowed)
		require.False(t, b.limiter.Degraded())
		before := b.limiter.Fallbacks() // 0 unless the first call, which dials, timed out

		b.proxy.Stop()

		// Still limiting, now in process: a fresh bucket of 3.
		for i := range 3 {
			res := b.limiter.Allow(t.Context(), "during", lim)
			require.True(t, res.Allowed, "call %d", i+1)
			require.Equal(t, 2-i, res.Remaining)
		}
		res := b.limiter.Allow(t.Context(), "during", lim)
		require.False(t, res.Allowed)
		require.Greater(t, res.RetryAfter, time.Duration(0))
		require.Equal(t, before+4, b.limiter.Fallbacks())
		require.True(t, b.limiter.Degraded(), "three failures in a row open the breaker")

		// With the breaker open, calls do not go to Redis, except one probe per openFor.
		sent := b.counter.Scripts()
		start := time.Now()
		for range 50 {
			b.limiter.Allow(t.Context(), "during", lim)
		}
		probes := int(time.Since(start)/openFor) + 1
		require.LessOrEqual(t, b.counter.Scripts()-sent, probes)
		require.Equal(t, before+54, b.limiter.Fallbacks())

		b.proxy.Start()

		// Back on Redis once the breaker lets a probe through and Redis answers it: the
		// breaker closes, and decisions are Redis keys again.
		i := 0
		require.Eventually(t, func() bool {
			i++
			key := "after" + strconv.Itoa(i)
			fallbacks := b.limiter.Fallbacks()
			res := b.limiter.Allow(t.Context(), key, lim)
			n, err := b.rdb.Exists(t.Context(), b.keys.Prefix()+"rate:"+key).Result()
			require.NoError(t, err)
			return res.Allowed && !b.limiter.Degraded() && b.limiter.Fallbacks() == fallbacks && n == 1
		}, 20*time.Second, 20*time.Millisecond)

		// One line for each switch, not one per request.
		warns := b.logs.Messages(t, slog.LevelWarn)
		require.Len(t, warns, 1, "%v", warns)
		require.Contains(t, warns[0], "limiting in process")
		infos := b.logs.Messages(t, slog.LevelInfo)
		require.Len(t, infos, 2, "%v", infos)
		require.Contains(t, infos[1], "Redis answers again")

		// The fallbacks are counted for /metrics.
		rec := httptest.NewRecorder()
		b.tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		require.Contains(t, rec.Body.String(), "svc_ratelimit_fallback_total")
		require.Contains(t, rec.Body.String(), `reason="breaker_open"`)
		require.Contains(t, rec.Body.String(), `reason="redis_error"`)
	})

	t.Run("UnresponsiveRedisCostsTheShortTimeout", func(t *testing.T) {
		t.Parallel()
		// A server that accepts connections and never answers: the client's own read
		// timeout (a minute here) must not be what callers wait for.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		var (
			mu    sync.Mutex
			conns []net.Conn
		)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				_ = c.Close()
			}
		})
		client := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: time.Minute, WriteTimeout: time.Minute, DialTimeout: time.Minute})
		t.Cleanup(func() { _ = client.Close() })
		counter := &commandCounter{}
		client.AddHook(counter)
		limiter := ratelimit.NewWithOptions(client, redisx.NewKeys("t:"), slog.New(slog.DiscardHandler), ratelimit.Options{Timeout: 50 * time.Millisecond, OpenFor: time.Hour})

		lim := ratelimit.PerMinute(2)
		start := time.Now()
		var got []bool
		for range 5 {
			got = append(got, limiter.Allow(t.Context(), "k", lim).Allowed)
		}
		// Generous: the bound is 3 × 50 ms; the client alone would take minutes.
		require.Less(t, time.Since(start), 30*time.Second)
		require.Equal(t, []bool{true, true, false, false, false}, got, "limited in process")
		require.True(t, limiter.Degraded())
		require.Equal(t, 3, counter.Scripts(), "the breaker opened after three calls: %v", counter.Names())
	})

	t.Run("CallerGoneDoesNotOpenTheBreaker", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ratelimit.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for range 10 {
			b.limiter.Allow(ctx, "k", ratelimit.PerMinute(100))
		}
		require.False(t, b.limiter.Degraded())
		require.True(t, b.limiter.Allow(t.Context(), "k", ratelimit.PerMinute(100)).Allowed)
	})

	t.Run("ConstructorPanicsOnMissingDependency", func(t *testing.T) {
		t.Parallel()
		log := slog.New(slog.DiscardHandler)
		require.PanicsWithValue(t, "nil redis client", func() { ratelimit.New(nil, redisx.NewKeys(""), log) })
		require.PanicsWithValue(t, "nil logger", func() {
			ratelimit.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), redisx.NewKeys(""), nil)
		})
	})
}

// BenchmarkLimiterAllow measures one decision against the test Redis, the EVALSHA round trip
// included.
func BenchmarkLimiterAllow(b *testing.B) {
	rdb, keys := testkit.NewRedis(b)
	limiter := ratelimit.New(rdb, keys, slog.New(slog.DiscardHandler))
	lim := ratelimit.PerMinute(1_000_000)
	var i atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res := limiter.Allow(context.Background(), "k"+strconv.FormatInt(i.Add(1)%64, 10), lim)
		if !res.Allowed {
			b.Fatal("refused")
		}
	}
	if limiter.Fallbacks() != 0 {
		b.Fatalf("%d decisions fell back", limiter.Fallbacks())
	}
}

// BenchmarkLocalAllow measures one in-process decision.
func BenchmarkLocalAllow(b *testing.B) {
	local := ratelimit.NewLocal(time.Now, ratelimit.DefaultMaxLocalKeys)
	lim := ratelimit.PerMinute(1_000_000)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		local.Allow("k"+strconv.Itoa(n%64), lim)
	}
}

// BenchmarkLimiterAllowBreakerOpen measures one decision while Redis is down and the breaker
// is open: what every request pays during an outage.
func BenchmarkLimiterAllowBreakerOpen(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more: connections are refused
	client := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = client.Close() })
	limiter := ratelimit.NewWithOptions(client, redisx.NewKeys("b:"), slog.New(slog.DiscardHandler), ratelimit.Options{OpenFor: time.Hour})
	lim := ratelimit.PerMinute(1_000_000)
	for !limiter.Degraded() {
		limiter.Allow(context.Background(), "warm", lim)
	}
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n++
		limiter.Allow(context.Background(), "k"+strconv.Itoa(n%64), lim)
	}
}
