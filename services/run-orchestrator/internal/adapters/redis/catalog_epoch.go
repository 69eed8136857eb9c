// Package redis is run-orchestrator's Redis adapter: it reads the editor's catalog epochs, per
// organization a counter workflow-editor moves forward after every write to the
// organization's workflows, which tells the snapshot cache whether an entry may still be used.
package redis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// KeyName is the first part of an organization's counter under SVC_REDIS_PREFIX; the
// editor writes the same keys.
const KeyName = "workflows:epoch"

// readTimeout bounds one read; a slower Redis means no cache for that batch.
const readTimeout = 100 * time.Millisecond

// RedisEpochs is app.CatalogEpochs over <prefix>workflows:epoch:<organization>.
type RedisEpochs struct {
	epochs *redisx.Epochs
	keys   redisx.Keys
}

// NewRedisEpochs returns the reader over rdb under keys.
func NewRedisEpochs(rdb redis.UniversalClient, keys redisx.Keys) *RedisEpochs {
	return &RedisEpochs{epochs: redisx.NewEpochs(rdb), keys: keys}
}

// Key is the counter of org.
func Key(keys redisx.Keys, org string) string { return keys.Key(KeyName, org) }

// Epochs reads every counter of orgs in one MGET. A missing one is started from the current
// time (a rare second round trip), so that the organization's snapshots can be kept again; a
// value that is not a counter is 0, and that organization is not cached.
func (e *RedisEpochs) Epochs(ctx context.Context, orgs []string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	names := make([]string, len(orgs))
	for i, org := range orgs {
		names[i] = Key(e.keys, org)
	}
	return e.epochs.Read(ctx, names)
}
