package redisx

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Epochs are counters that only move forward: a writer moves one after each change it
// commits, and a cache keeps an entry only while the counter still holds the value read before
// the entry was read (identity's revocation epoch, the editor's catalog epochs). A missing
// counter (Redis flushed, or restarted without persistence) starts again from the current time
// in microseconds rather than from zero, so it never comes back to a value an entry may have
// been stored under.
type Epochs struct {
	rdb  redis.UniversalClient
	bump *redis.Script
	seed *redis.Script
	now  func() time.Time
}

// bumpScript moves a counter forward, starting a missing one from ARGV[1].
const bumpScript = `if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])`

// seedScript returns a counter, starting a missing one at ARGV[1].
const seedScript = `if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('GET', KEYS[1])`

// NewEpochs returns the counters of rdb.
func NewEpochs(rdb redis.UniversalClient) *Epochs {
	if rdb == nil {
		panic("nil redis client")
	}
	return &Epochs{rdb: rdb, bump: redis.NewScript(bumpScript), seed: redis.NewScript(seedScript), now: time.Now}
}

// Bump moves the counter key forward by one and returns its new value.
func (e *Epochs) Bump(ctx context.Context, key string) (int64, error) {
	v, err := e.bump.Run(ctx, e.rdb, []string{key}, e.now().UnixMicro()).Int64()
	if err != nil {
		return 0, fmt.Errorf("bump %s: %w", key, err)
	}
	return v, nil
}

// Read returns the counters of keys in one MGET; a missing one is started (one more round
// trip each), so that readers can use it at once. A value that is not a counter reads as 0:
// unknown, never equal to a stored entry's epoch.
func (e *Epochs) Read(ctx context.Context, keys []string) ([]int64, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	vals, err := e.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("read epochs: %w", err)
	}
	out := make([]int64, len(keys))
	for i, v := range vals {
		if v == nil {
			if out[i], err = e.seed.Run(ctx, e.rdb, []string{keys[i]}, e.now().UnixMicro()).Int64(); err != nil {
				return nil, fmt.Errorf("start epoch %s: %w", keys[i], err)
			}
			continue
		}
		s, _ := v.(string)
		if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			out[i] = 0
		}
	}
	return out, nil
}
