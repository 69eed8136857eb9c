package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
	"svc.dev/services/gateway/internal/app"
)

// StreamSlotsKey is the prefix of the sets of open streams, one per ceiling (SVC_REDIS_PREFIX
// first).
const StreamSlotsKey = "streams:"

// DefaultStreamLease is how long a slot outlives its gateway's last renewal: a gateway that
// dies with streams open frees their slots within it.
const DefaultStreamLease = 30 * time.Second

// takeSlots: KEYS the ceilings' sorted sets (member: a stream, score: when its lease ends, in
// ms of Redis's clock, so gateways' clocks never disagree); ARGV: the lease (ms), the member,
// then each set's max. Expired leases are dropped from every set; then, only when every set
// holds fewer than its max, the member is added to all of them. It answers 0 when the slots
// were taken, else the (1-based) index of the first full set. One script, so that concurrent
// opens on any number of gateways never exceed a ceiling, and none is taken without the
// others.
const takeSlots = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
end
for i = 1, #KEYS do
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[2 + i]) then
    return i
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ARGV[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return 0
`

// renewSlots: ARGV the lease (ms) and the member; extends the member's lease in every set
// that still holds it (a slot already dropped is not taken again), and each set's expiry with
// it.
const renewSlots = `
local t = redis.call('TIME')
local ends = t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[1]
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[2]) then
    redis.call('ZADD', KEYS[i], ends, ARGV[2])
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
return 1
`

// releaseSlots: ARGV the member; gives its slot back in every set.
const releaseSlots = `
for i = 1, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
return 1
`

// RedisStreamSlots implements app.StreamSlots with one sorted set per ceiling (a principal,
// a user, an organization): a member per open stream, the same in each of its stream's sets,
// scored by when its lease ends. The gateway holding the stream renews the lease every third
// of it and removes the member when the stream ends; a gateway that dies leaves members that
// expire with their lease. Every set of one Take must live on one Redis node, as every key of
// a deployment's prefix does without Cluster (libs/ratelimit AllowAll alike).
type RedisStreamSlots struct {
	rdb                  redis.UniversalClient
	keys                 redisx.Keys
	lease                time.Duration
	take, renew, release *redis.Script
}

// NewRedisStreamSlots counts slots in rdb under keys, each lease lasting lease (>0).
func NewRedisStreamSlots(rdb redis.UniversalClient, keys redisx.Keys, lease time.Duration) *RedisStreamSlots {
	if rdb == nil || lease <= 0 {
		panic("stream slots: nil redis client or no lease")
	}
	return &RedisStreamSlots{rdb: rdb, keys: keys, lease: lease,
		take: redis.NewScript(takeSlots), renew: redis.NewScript(renewSlots), release: redis.NewScript(releaseSlots)}
}

// Take implements app.StreamSlots in one round trip to Redis.
func (s *RedisStreamSlots) Take(ctx context.Context, ceilings []app.StreamCeiling) (int, error) {
	if len(ceilings) == 0 {
		panic("stream slots: no ceiling")
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	member := hex.EncodeToString(b[:])
	sets := make([]string, len(ceilings))
	args := make([]any, 0, 2+len(ceilings))
	args = append(args, s.lease.Milliseconds(), member)
	for i, c := range ceilings {
		sets[i] = s.keys.Key(StreamSlotsKey + c.Key)
		args = append(args, c.Max)
	}
	tctx, cancel := context.WithTimeout(ctx, epochTimeout)
	defer cancel()
	full, err := s.take.Run(tctx, s.rdb, sets, args...).Int()
	if err != nil {
		return -1, fmt.Errorf("take a stream slot: %w", err)
	}
	if full < 0 || full > len(ceilings) {
		return -1, fmt.Errorf("take a stream slot: unexpected answer %d", full)
	}
	if full > 0 {
		return full - 1, nil
	}
	go s.hold(ctx, sets, member)
	return -1, nil
}

// hold renews the leases of member until ctx ends, then gives its slots back.
func (s *RedisStreamSlots) hold(ctx context.Context, sets []string, member string) {
	tick := time.NewTicker(s.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = s.release.Run(rctx, s.rdb, sets, member).Err() // failing that, the leases end them
			cancel()
			return
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = s.renew.Run(rctx, s.rdb, sets, s.lease.Milliseconds(), member).Err()
			cancel()
		}
	}
}
