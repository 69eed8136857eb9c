package ratelimiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// StreamSlotsKey is the prefix of the per-principal sets of open streams (SVC_REDIS_PREFIX
// first).
const StreamSlotsKey = "streams:"

// DefaultStreamLease is how long a slot outlives its gateway's last renewal: a gateway that
// dies with streams open frees their slots within it.
const DefaultStreamLease = 30 * time.Second

// takeSlot: KEYS[1] the principal's sorted set (member: a stream, score: when its lease
// ends, in ms of Redis's clock, so gateways' clocks never disagree); ARGV: the lease (ms), max,
// the member. Expired leases are dropped, then a slot is taken if fewer than max remain.
const takeSlot = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`

// renewSlot: ARGV the lease (ms) and the member; extends the member's lease if it still
// holds one (a slot already dropped is not taken again), and the set's expiry with it.
const renewSlot = `
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 1
`

// RedisStreamSlots implements app.StreamSlots with one sorted set per principal: a member per
// open stream, scored by when its lease ends. The gateway holding the stream renews the lease
// every third of it and removes the member when the stream ends; a gateway that dies leaves
// members that expire with their lease.
type RedisStreamSlots struct {
	rdb         redis.UniversalClient
	keys        redisx.Keys
	lease       time.Duration
	take, renew *redis.Script
}

// NewRedisStreamSlots counts slots in rdb under keys, each lease lasting lease (>0).
func NewRedisStreamSlots(rdb redis.UniversalClient, keys redisx.Keys, lease time.Duration) *RedisStreamSlots {
	if rdb == nil || lease <= 0 {
		panic("stream slots: nil redis client or no lease")
	}
	return &RedisStreamSlots{rdb: rdb, keys: keys, lease: lease, take: redis.NewScript(takeSlot), renew: redis.NewScript(renewSlot)}
}

// Take implements app.StreamSlots.
func (s *RedisStreamSlots) Take(ctx context.Context, key string, max int) (bool, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	member := hex.EncodeToString(b[:])
	set := s.keys.Key(StreamSlotsKey + key)
	tctx, cancel := context.WithTimeout(ctx, epochTimeout)
	defer cancel()
	took, err := s.take.Run(tctx, s.rdb, []string{set}, s.lease.Milliseconds(), max, member).Int()
	if err != nil {
		return false, fmt.Errorf("take a stream slot: %w", err)
	}
	if took == 0 {
		return false, nil
	}
	go s.hold(ctx, set, member)
	return true, nil
}

// hold renews the lease of member until ctx ends, then gives the slot back.
func (s *RedisStreamSlots) hold(ctx context.Context, set, member string) {
	tick := time.NewTicker(s.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = s.rdb.ZRem(rctx, set, member).Err() // failing that, the lease ends it
			cancel()
			return
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = s.renew.Run(rctx, s.rdb, []string{set}, s.lease.Milliseconds(), member).Err()
			cancel()
		}
	}
}
