package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// EpochKey is identity's revocation epoch under SVC_REDIS_PREFIX (identity's
// internal/adapters/epoch increments it).
const EpochKey = "auth:epoch"

// epochTimeout bounds one read; a slower Redis means no cache for that request.
const epochTimeout = 100 * time.Millisecond

var errNoEpoch = errors.New("no revocation epoch yet") //nolint:gochecknoglobals // sentinel

// RedisEpochReader implements app.EpochReader with one GET.
type RedisEpochReader struct {
	rdb redis.UniversalClient
	key string
}

// NewRedisEpochReader reads <prefix>auth:epoch from rdb.
func NewRedisEpochReader(rdb redis.UniversalClient, keys redisx.Keys) *RedisEpochReader {
	if rdb == nil {
		panic("nil redis client")
	}
	return &RedisEpochReader{rdb: rdb, key: keys.Key(EpochKey)}
}

// Epoch is the current epoch. While the counter is missing (identity never bumped it, or Redis
// lost it) it answers errNoEpoch and the cache stays unused: an epoch read from a counter that
// restarted could equal one an old entry holds. Identity restarts a lost counter from the
// current time, past every value it held before.
func (r *RedisEpochReader) Epoch(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, epochTimeout)
	defer cancel()
	s, err := r.rdb.Get(ctx, r.key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, errNoEpoch
	}
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", r.key, err)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("epoch %q: %w", s, err)
	}
	return n, nil
}
