// Package redis holds identity's Redis adapters: the revocation epoch, a counter the gateway
// reads to know whether the identities it cached may still be used, and the attempt limiters.
package redis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// KeyName is the counter's name under SVC_REDIS_PREFIX; the gateway reads the same key.
const KeyName = "auth:epoch"

// bumpTimeout bounds one INCR: the answer of the auth call waits for it.
const bumpTimeout = 200 * time.Millisecond

// RedisEpoch increments <prefix>auth:epoch.
type RedisEpoch struct {
	epochs *redisx.Epochs
	key    string
}

// NewRedisEpoch returns the counter in rdb under keys.
func NewRedisEpoch(rdb redis.UniversalClient, keys redisx.Keys) *RedisEpoch {
	return &RedisEpoch{epochs: redisx.NewEpochs(rdb), key: keys.Key(KeyName)}
}

// Bump moves the epoch forward by one (a lost counter restarts from the current time, never
// from a value it held: redisx.Epochs).
func (e *RedisEpoch) Bump(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, bumpTimeout)
	defer cancel()
	_, err := e.epochs.Bump(ctx, e.key)
	return err
}
