// Package redis is webhook-ingress's Redis adapter: the idempotency keys of deliveries
// (key → run id with a TTL, written with SET NX).
package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
)

// IdempotencyStore is the port.KeyStore over Redis. Keys are hashed under the service's prefix
// (<prefix>webhook:idem:<sha256 hex>), so that a sender's key of any length or content makes
// one short, safe Redis key.
type IdempotencyStore struct {
	c    *goredis.Client
	keys redisx.Keys
}

// NewIdempotencyStore returns the store over c with keys under keys' prefix.
func NewIdempotencyStore(c *goredis.Client, keys redisx.Keys) *IdempotencyStore {
	if c == nil {
		panic("nil redis client")
	}
	return &IdempotencyStore{c: c, keys: keys}
}

// Key is the Redis key that holds key.
func (s *IdempotencyStore) Key(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.keys.Key("webhook", "idem", hex.EncodeToString(sum[:]))
}

// Get implements port.KeyStore with one MGET.
func (s *IdempotencyStore) Get(ctx context.Context, keys ...string) (string, error) {
	if len(keys) == 0 {
		return "", nil
	}
	rk := make([]string, len(keys))
	for i, k := range keys {
		rk[i] = s.Key(k)
	}
	vs, err := s.c.MGet(ctx, rk...).Result()
	if err != nil {
		return "", fmt.Errorf("get idempotency keys: %w", err)
	}
	for _, v := range vs {
		if id, ok := v.(string); ok && id != "" {
			return id, nil
		}
	}
	return "", nil
}

// Remember implements port.KeyStore with one SET NX per key, pipelined; when keys[0] was
// already set it reads the run id it holds.
func (s *IdempotencyStore) Remember(ctx context.Context, keys []string, runID string, ttl time.Duration) (string, error) {
	if len(keys) == 0 {
		return runID, nil
	}
	var first *goredis.BoolCmd
	_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			cmd := p.SetNX(ctx, s.Key(k), runID, ttl)
			if i == 0 {
				first = cmd
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("set idempotency keys: %w", err)
	}
	if first.Val() {
		return runID, nil
	}
	v, err := s.c.Get(ctx, s.Key(keys[0])).Result()
	if errors.Is(err, goredis.Nil) {
		// Expired between the two calls: nothing names another run.
		return runID, nil
	}
	if err != nil {
		return "", fmt.Errorf("get idempotency key: %w", err)
	}
	return v, nil
}
