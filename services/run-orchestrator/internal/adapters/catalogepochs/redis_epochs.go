// Package catalogepochs reads the editor's catalog epochs from Redis: per organization, a
// counter workflow-editor moves forward after every write to the organization's workflows
// (its internal/adapters/catalogepoch), which tells the snapshot cache whether an entry may
// still be used.
package catalogepochs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// KeyName is the first part of an organization's counter under SVC_REDIS_PREFIX; the
// editor writes the same keys.
const KeyName = "workflows:epoch"

// readTimeout bounds one read; a slower Redis means no cache for that batch.
const readTimeout = 100 * time.Millisecond

// seedScript gives a missing counter (Redis flushed or restarted without persistence) the
// current time in microseconds, as the editor's increment does, and returns the counter: a
// lost counter never comes back at a value an entry may have been stored under.
const seedScript = `if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('GET', KEYS[1])`

// RedisEpochs is app.CatalogEpochs over <prefix>workflows:epoch:<organization>.
type RedisEpochs struct {
	rdb  redis.UniversalClient
	keys redisx.Keys
	seed *redis.Script
	now  func() time.Time
}

// New returns the reader over rdb under keys.
func New(rdb redis.UniversalClient, keys redisx.Keys) *RedisEpochs {
	if rdb == nil {
		panic("nil redis client")
	}
	return &RedisEpochs{rdb: rdb, keys: keys, seed: redis.NewScript(seedScript), now: time.Now}
}

// Key is the counter of org.
func Key(keys redisx.Keys, org string) string { return keys.Key(KeyName, org) }

// Epochs reads every counter of orgs in one MGET; a missing one is seeded (a rare second
// round trip) so that the organization's snapshots can be kept again.
func (e *RedisEpochs) Epochs(ctx context.Context, orgs []string) ([]int64, error) {
	if len(orgs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	names := make([]string, len(orgs))
	for i, org := range orgs {
		names[i] = Key(e.keys, org)
	}
	vals, err := e.rdb.MGet(ctx, names...).Result()
	if err != nil {
		return nil, fmt.Errorf("read catalog epochs: %w", err)
	}
	out := make([]int64, len(orgs))
	for i, v := range vals {
		if v == nil {
			if out[i], err = e.seed.Run(ctx, e.rdb, []string{names[i]}, e.now().UnixMicro()).Int64(); err != nil {
				return nil, fmt.Errorf("seed catalog epoch: %w", err)
			}
			continue
		}
		s, _ := v.(string)
		if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			out[i] = 0 // not a counter: this organization's snapshots are not cached
		}
	}
	return out, nil
}
