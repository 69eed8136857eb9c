package ratelimit

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bucket is one bucket of a decision over several (AllowAll).
type Bucket struct {
	Key   string
	Limit Limit
}

// allowAll is redis_rate's GCRA (allowN, cost 1) over every key at once, in the same stored
// form (the theoretical arrival time in seconds since 2017 under "rate:<key>"), so a bucket
// means the same to Allow and AllowAll: every bucket is checked first, and a token is taken
// from each only when each has one. ARGV: burst, rate, period (s) per key. It answers the
// overall decision, then per key: allowed, remaining, retry after and reset after (s).
//
//nolint:gochecknoglobals // a script: a constant whose digest is cached
var allowAll = redis.NewScript(`
local jan_1_2017 = 1483228800
local t = redis.call("TIME")
local now = (t[1] - jan_1_2017) + (t[2] / 1000000)
local all = 1
local out = {0}
local news = {}
for i = 1, #KEYS do
  local burst = tonumber(ARGV[3 * i - 2])
  local rate = tonumber(ARGV[3 * i - 1])
  local period = tonumber(ARGV[3 * i])
  local emission = period / rate
  local tat = redis.call("GET", KEYS[i])
  if not tat then tat = now else tat = tonumber(tat) end
  tat = math.max(tat, now)
  local new_tat = tat + emission
  local diff = now - (new_tat - emission * burst)
  if diff < 0 then
    all = 0
    table.insert(out, 0)
    table.insert(out, 0)
    table.insert(out, tostring(-diff))
    table.insert(out, tostring(tat - now))
  else
    news[i] = new_tat
    table.insert(out, 1)
    table.insert(out, math.floor(diff / emission))
    table.insert(out, "-1")
    table.insert(out, tostring(new_tat - now))
  end
end
if all == 1 then
  for i = 1, #KEYS do
    local reset_after = news[i] - now
    if reset_after > 0 then
      redis.call("SET", KEYS[i], news[i], "EX", math.ceil(reset_after))
    end
  end
end
out[1] = all
return out
`)

// AllowAll takes one token from every bucket, or from none: the request is allowed only when
// each bucket has a token, and a refused request costs no bucket anything. In Redis it is one
// EVALSHA over all the keys, the same round trip as Allow (the keys must live on one Redis
// node, as every key of a deployment's prefix does without Cluster). While Redis fails it is
// decided by the in-process buckets, all or none as well. The answer is the tighter bucket's:
// when allowed, the one with the fewest tokens left (the first on a tie); when refused, the
// refused one that must be waited for longest.
func (l *Limiter) AllowAll(ctx context.Context, buckets ...Bucket) Result {
	if len(buckets) == 0 {
		panic("ratelimit: AllowAll needs a bucket")
	}
	for _, b := range buckets {
		b.Limit.mustBeValid()
	}
	return l.decide(ctx, func() (Result, error) { return l.remoteAll(ctx, buckets) }, func() Result { return l.local.AllowAll(buckets...) })
}

// remoteAll is one run of allowAll, bounded by l.timeout as remote is.
func (l *Limiter) remoteAll(ctx context.Context, buckets []Bucket) (Result, error) {
	keys := make([]string, len(buckets))
	args := make([]any, 0, 3*len(buckets))
	for i, b := range buckets {
		keys[i] = l.prefix + "rate:" + b.Key
		args = append(args, b.Limit.Burst, b.Limit.Rate, b.Limit.Period.Seconds())
	}
	v, err := bounded(ctx, l.timeout, func(ctx context.Context) ([]any, error) {
		return allowAll.Run(ctx, l.rdb, keys, args...).Slice()
	})
	if err != nil {
		return Result{}, err
	}
	each, err := parseAll(v, buckets)
	if err != nil {
		return Result{}, fmt.Errorf("redis rate limit: %w", err)
	}
	return tighter(each), nil
}

func parseAll(v []any, buckets []Bucket) ([]Result, error) {
	if len(v) != 1+4*len(buckets) {
		return nil, fmt.Errorf("answer of %d values for %d buckets", len(v), len(buckets))
	}
	all, _ := v[0].(int64)
	out := make([]Result, len(buckets))
	for i, b := range buckets {
		f := v[1+4*i : 5+4*i]
		remaining, _ := f[1].(int64)
		retry, err1 := strconv.ParseFloat(fmt.Sprint(f[2]), 64)
		reset, err2 := strconv.ParseFloat(fmt.Sprint(f[3]), 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		r := Result{Allowed: all == 1, Limit: b.Limit.Burst, Remaining: max(int(remaining), 0), ResetAfter: max(seconds(reset), 0)}
		if ok, _ := f[0].(int64); ok == 0 {
			r.RetryAfter = max(seconds(retry), time.Nanosecond)
		}
		out[i] = r
	}
	return out, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// tighter is the one result that speaks for several buckets decided together.
func tighter(each []Result) Result {
	best := each[0]
	for _, r := range each[1:] {
		if best.Allowed {
			if r.Remaining < best.Remaining {
				best = r
			}
			continue
		}
		if r.RetryAfter > best.RetryAfter {
			best = r
		}
	}
	if !best.Allowed && best.RetryAfter == 0 {
		// Allowed by this bucket, refused by another: never reached (a refused one waits
		// longer than 0), kept for safety.
		best.RetryAfter = time.Nanosecond
	}
	return best
}

// AllowAll takes one token from every bucket or from none, as Limiter.AllowAll does in
// Redis.
func (b *Local) AllowAll(buckets ...Bucket) Result {
	for _, bk := range buckets {
		bk.Limit.mustBeValid()
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropFull(now)
	each := make([]Result, len(buckets))
	next := make([]time.Time, len(buckets))
	allowed, fresh := true, 0
	for i, bk := range buckets {
		var tat time.Time
		if known, ok := b.buckets[bk.Key]; ok {
			tat = known.tat
		} else {
			fresh++
		}
		each[i], next[i] = gcra(now, tat, bk.Limit)
		allowed = allowed && each[i].Allowed
	}
	if allowed && fresh > 0 && len(b.buckets)+fresh > b.maxKeys {
		// As Allow: no room for a new bucket while every bucket held is in use.
		wait := b.byTAT[0].tat.Sub(now)
		return Result{Limit: buckets[0].Limit.Burst, RetryAfter: max(wait, time.Nanosecond), ResetAfter: wait}
	}
	if !allowed {
		for i := range each {
			each[i].Allowed = false
		}
		return tighter(each)
	}
	for i, bk := range buckets {
		if known, ok := b.buckets[bk.Key]; ok {
			known.tat = next[i]
			heap.Fix(&b.byTAT, known.index)
			continue
		}
		nb := &bucket{key: bk.Key, tat: next[i]}
		b.buckets[bk.Key] = nb
		heap.Push(&b.byTAT, nb)
	}
	return tighter(each)
}
