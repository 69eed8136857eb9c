package apikey

import (
	"context"
	"time"
)

// Repository stores keys.
type Repository interface {
	Add(ctx context.Context, k *APIKey) error
	Get(ctx context.Context, id string) (*APIKey, error)
	// ByHash finds a key by the digest of its raw value: one indexed lookup.
	ByHash(ctx context.Context, hash string) (*APIKey, error)
	// ListByOrganization lists an organization's keys, oldest first.
	ListByOrganization(ctx context.Context, organizationID string) ([]*APIKey, error)
	// Delete revokes a key: it is gone for the very next request.
	Delete(ctx context.Context, id string) error
	// Touch records uses: lastRequest of each key moves to its time unless already later.
	Touch(ctx context.Context, uses map[string]time.Time) error
}
