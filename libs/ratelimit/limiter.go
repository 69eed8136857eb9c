// Package ratelimit keeps token buckets (GCRA) in Redis, one round trip per decision. A
// decision never fails: while Redis errs, is slow or is cut off by the circuit breaker, buckets
// in process memory answer instead (see Limiter and Local). The gateway limits each
// (organization, principal) with it; identity limits sign-in attempts.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"svc.dev/libs/redisx"
)

// Limit is a bucket of capacity Burst that refills Rate tokens every Period.
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// PerMinute is a bucket of capacity n that refills n tokens a minute: n requests at once,
// then one every minute/n.
func PerMinute(n int) Limit { return Limit{Rate: n, Period: time.Minute, Burst: n} }

// valid reports whether the limit describes a bucket that can ever allow a request.
func (l Limit) valid() bool {
	return l.Rate > 0 && l.Burst > 0 && l.Period > 0 && l.Period/time.Duration(l.Rate) > 0
}

func (l Limit) mustBeValid() {
	if !l.valid() {
		panic(fmt.Sprintf("ratelimit: invalid limit %+v: rate, burst and period must be positive", l))
	}
}

// Result is one decision.
type Result struct {
	// Allowed says whether the request took a token.
	Allowed bool
	// Limit is the capacity of the bucket.
	Limit int
	// Remaining is how many more requests the bucket would allow right now.
	Remaining int
	// RetryAfter is how long until one request is allowed again; 0 when Allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
}

// Options tune a Limiter. A zero field takes its default.
type Options struct {
	// Timeout bounds one Redis call, whatever the client's own timeouts; past it the call is
	// answered in process. Default 100 ms.
	Timeout time.Duration
	// Failures is how many failed Redis calls in a row open the breaker. Default 3.
	Failures uint32
	// OpenFor is how long the breaker stays open before one call probes Redis again.
	// Default 5 s.
	OpenFor time.Duration
	// MaxLocalKeys bounds the in-process buckets; while that many are in use and none is
	// full, a key without a bucket is refused. Default 100 000.
	MaxLocalKeys int
	// Meter receives svc_ratelimit_fallback_total. Default: no metrics.
	Meter metric.MeterProvider
	// Now is the clock of the in-process buckets. Default time.Now.
	Now func() time.Time
}

// The defaults of Options.
const (
	DefaultTimeout      = 100 * time.Millisecond
	DefaultFailures     = 3
	DefaultOpenFor      = 5 * time.Second
	DefaultMaxLocalKeys = 100_000
)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Failures == 0 {
		o.Failures = DefaultFailures
	}
	if o.OpenFor <= 0 {
		o.OpenFor = DefaultOpenFor
	}
	if o.MaxLocalKeys <= 0 {
		o.MaxLocalKeys = DefaultMaxLocalKeys
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Limiter decides in Redis, or in process while Redis fails. It is safe for concurrent use.
//
// A call Redis does not answer within the timeout is decided by the in-process bucket of the
// same key, and a circuit breaker (gobreaker) stops asking a Redis that keeps failing, so an
// outage costs requests no timeout; now and then the breaker lets one call probe Redis, and
// the limiter goes back to it when it answers. Each switch is logged once. In-process buckets
// are per replica: during an outage each replica enforces the whole limit on its own, so a
// client spread over N replicas gets up to N times the limit, and buckets start full on the
// switch in both directions.
type Limiter struct {
	log   *slog.Logger
	rate  *redis_rate.Limiter
	local *Local
	// rdb and prefix serve AllowAll's own script; Allow goes through redis_rate.
	rdb       *redis.Client
	prefix    string
	breaker   *gobreaker.CircuitBreaker[Result]
	timeout   time.Duration
	fallbacks atomic.Uint64
	counter   metric.Int64Counter
	// lastErr is the latest Redis failure, logged with the switch to in-process buckets.
	lastErr atomic.Pointer[string]
}

// New returns a Limiter with the default Options. Its keys live under keys' prefix.
func New(rdb *redis.Client, keys redisx.Keys, log *slog.Logger) *Limiter {
	return NewWithOptions(rdb, keys, log, Options{})
}

// NewWithOptions returns a Limiter tuned by opts. Its keys live under keys' prefix.
func NewWithOptions(rdb *redis.Client, keys redisx.Keys, log *slog.Logger, opts Options) *Limiter {
	if rdb == nil {
		panic("nil redis client")
	}
	if log == nil {
		panic("nil logger")
	}
	opts = opts.withDefaults()
	counter, err := opts.Meter.Meter("svc.dev/libs/ratelimit").Int64Counter("svc_ratelimit_fallback",
		metric.WithDescription("Rate-limit decisions answered by an in-process bucket because Redis failed or the breaker was open."))
	if err != nil {
		panic(fmt.Sprintf("ratelimit: counter: %v", err)) // only for an invalid name
	}
	l := &Limiter{
		log:     log,
		rate:    redis_rate.NewLimiter(prefixed{Client: rdb, prefix: keys.Prefix()}),
		local:   NewLocal(opts.Now, opts.MaxLocalKeys),
		rdb:     rdb,
		prefix:  keys.Prefix(),
		timeout: opts.Timeout,
		counter: counter,
	}
	l.breaker = gobreaker.NewCircuitBreaker[Result](gobreaker.Settings{
		Name:        "ratelimit-redis",
		MaxRequests: 1,
		Timeout:     opts.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= opts.Failures },
		// A caller that went away says nothing about Redis.
		IsExcluded:    func(err error) bool { return errors.Is(err, errCallerGone) },
		OnStateChange: l.stateChanged,
	})
	return l
}

// errCallerGone marks a Redis call cut short because the caller's context ended.
var errCallerGone = errors.New("caller context ended")

// Allow takes one token from the bucket of key, in Redis or, while Redis fails, in process.
// Keys of different users of one Redis prefix should carry their own namespace
// ("gw:org_1:key_1", "signin:ip:203.0.113.9"). An invalid lim is a programmer error: Allow
// panics.
func (l *Limiter) Allow(ctx context.Context, key string, lim Limit) Result {
	lim.mustBeValid()
	return l.decide(ctx, func() (Result, error) { return l.remote(ctx, key, lim) }, func() Result { return l.local.Allow(key, lim) })
}

// decide asks Redis (remote, behind the breaker) and, when that fails, falls back to the
// in-process buckets (local), counting the fallback and remembering why.
func (l *Limiter) decide(ctx context.Context, remote func() (Result, error), local func() Result) Result {
	res, err := l.breaker.Execute(remote)
	if err == nil {
		return res
	}
	reason := "redis_error"
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		reason = "breaker_open"
	} else if !errors.Is(err, errCallerGone) {
		msg := err.Error()
		l.lastErr.Store(&msg)
	}
	l.fallbacks.Add(1)
	l.counter.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("reason", reason)))
	return local()
}

// remote is one EVALSHA of redis_rate's GCRA script (EVAL once more only when Redis lost the
// script, after a restart). The call runs beside the caller so that the caller waits at most
// l.timeout even when the client's own read timeout is longer, as it is for a Redis that
// accepts connections and never answers.
func (l *Limiter) remote(ctx context.Context, key string, lim Limit) (Result, error) {
	res, err := bounded(ctx, l.timeout, func(ctx context.Context) (*redis_rate.Result, error) {
		return l.rate.Allow(ctx, key, redis_rate.Limit{Rate: lim.Rate, Burst: lim.Burst, Period: lim.Period})
	})
	if err != nil {
		return Result{}, err
	}
	return toResult(res, lim), nil
}

// bounded runs call beside the caller under timeout, so that the caller waits at most that
// long even when the Redis client's own read timeout is longer. A call cut short because the
// caller's context ended is errCallerGone; any other failure is a Redis error.
func bounded[T any](parent context.Context, timeout time.Duration, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := call(ctx)
		done <- answer{v, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		a.err = ctx.Err()
	}
	if a.err != nil {
		var zero T
		if parent.Err() != nil {
			return zero, errCallerGone
		}
		return zero, fmt.Errorf("redis rate limit: %w", a.err)
	}
	return a.v, nil
}

func toResult(r *redis_rate.Result, lim Limit) Result {
	res := Result{
		Allowed:    r.Allowed > 0,
		Limit:      lim.Burst,
		Remaining:  max(r.Remaining, 0),
		ResetAfter: max(r.ResetAfter, 0),
	}
	if !res.Allowed {
		res.RetryAfter = max(r.RetryAfter, time.Nanosecond) // redis_rate says -1 when allowed
	}
	return res
}

// stateChanged logs each switch between Redis and the in-process buckets once. The probes of
// an open breaker (half-open, then open again while Redis still fails) are debug lines.
func (l *Limiter) stateChanged(_ string, from, to gobreaker.State) {
	switch {
	case to == gobreaker.StateOpen && from == gobreaker.StateClosed:
		cause := ""
		if p := l.lastErr.Load(); p != nil {
			cause = *p
		}
		l.log.Warn("rate limit: Redis is failing; limiting in process memory, per replica, until it answers again",
			"err", cause)
	case to == gobreaker.StateClosed:
		l.log.Info("rate limit: Redis answers again; limiting in Redis")
	default:
		l.log.Debug("rate limit: breaker state", "from", from.String(), "to", to.String())
	}
}

// Fallbacks is how many decisions were answered in process since the Limiter was built.
func (l *Limiter) Fallbacks() uint64 { return l.fallbacks.Load() }

// Degraded reports whether the breaker is open or probing, that is, whether Redis is
// currently not trusted with decisions.
func (l *Limiter) Degraded() bool { return l.breaker.State() != gobreaker.StateClosed }

// prefixed is the client as redis_rate sees it, with every key moved under the deployment's
// prefix: redis_rate itself names its keys "rate:<key>" at the root of the keyspace.
type prefixed struct {
	*redis.Client
	prefix string
}

func (p prefixed) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.prefix + k
	}
	return out
}

func (p prefixed) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.Client.Eval(ctx, script, p.keys(keys), args...)
}

func (p prefixed) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.Client.EvalSha(ctx, sha1, p.keys(keys), args...)
}

func (p prefixed) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.Client.EvalRO(ctx, script, p.keys(keys), args...)
}

func (p prefixed) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.Client.EvalShaRO(ctx, sha1, p.keys(keys), args...)
}

func (p prefixed) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return p.Client.Del(ctx, p.keys(keys)...)
}
