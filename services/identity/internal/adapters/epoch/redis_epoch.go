// Package epoch is identity's adapter for the revocation epoch: a Redis counter the gateway
// reads to know whether the identities it cached may still be used.
package epoch

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// KeyName is the counter's name under SVC_REDIS_PREFIX; the gateway reads the same key.
const KeyName = "auth:epoch"

// bumpTimeout bounds one INCR: the answer of the auth call waits for it.
const bumpTimeout = 200 * time.Millisecond

// bumpScript moves the epoch forward. A missing counter (Redis flushed or restarted without
// persistence) starts again from the current time in microseconds, not from zero, so the
// epoch never returns to a value the gateway may still hold in a cached entry.
const bumpScript = `if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])`

// RedisEpoch increments <prefix>auth:epoch.
type RedisEpoch struct {
	rdb    redis.UniversalClient
	key    string
	script *redis.Script
}

// NewRedisEpoch returns the counter in rdb under keys.
func NewRedisEpoch(rdb redis.UniversalClient, keys redisx.Keys) *RedisEpoch {
	if rdb == nil {
		panic("nil redis client")
	}
	return &RedisEpoch{rdb: rdb, key: keys.Key(KeyName), script: redis.NewScript(bumpScript)}
}

// Bump moves the epoch forward by one.
func (e *RedisEpoch) Bump(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, bumpTimeout)
	defer cancel()
	if err := e.script.Run(ctx, e.rdb, []string{e.key}, time.Now().UnixMicro()).Err(); err != nil {
		return fmt.Errorf("bump %s: %w", e.key, err)
	}
	return nil
}
