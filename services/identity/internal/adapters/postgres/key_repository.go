package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
)

const (
	keyColumns = `k.id, k.name, k.start, k.key_hash, k.reference_id, k.created_by, k.enabled, k.expires_at,
		k.last_request, k.created_at, k.updated_at`
	insertKey = `INSERT INTO api_keys (id, name, start, key_hash, reference_id, created_by, enabled, expires_at,
		last_request, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	selectKeyByID   = `SELECT ` + keyColumns + ` FROM api_keys k WHERE k.id = $1`
	selectKeyByHash = `SELECT ` + keyColumns + ` FROM api_keys k WHERE k.key_hash = $1`
	// authenticateKey is the request path: one lookup by the unique hash, joined by primary
	// key to the key's creator.
	authenticateKey = `SELECT ` + keyColumns + `, u.id, u.email, u.name
		FROM api_keys k LEFT JOIN users u ON u.id = k.created_by WHERE k.key_hash = $1`
	selectKeysOfOrg = `SELECT ` + keyColumns + ` FROM api_keys k WHERE k.reference_id = $1 ORDER BY k.created_at, k.id`
	deleteKey       = `DELETE FROM api_keys WHERE id = $1`
	// touchKeys writes a batch of uses in one statement; lastRequest never moves backwards.
	touchKeys = `UPDATE api_keys k SET last_request = v.at
		FROM unnest($1::text[], $2::timestamptz[]) AS v(id, at)
		WHERE k.id = v.id AND (k.last_request IS NULL OR k.last_request < v.at)`
)

// KeyRepository implements port.Keys. It keeps every organization within perOrg keys and
// every user within perUser keys created (port.Ceilings).
type KeyRepository struct {
	pool            *pgxpool.Pool
	perOrg, perUser int
}

// NewKeyRepository returns the repository; a key past perOrg (apikey.ErrTooManyKeys) or
// perUser (apikey.ErrTooManyKeysOfUser), each at least 1, is refused.
func NewKeyRepository(pool *pgxpool.Pool, perOrg, perUser int) *KeyRepository {
	if perOrg < 1 || perUser < 1 {
		panic("key ceilings must be at least 1")
	}
	return &KeyRepository{pool: pool, perOrg: perOrg, perUser: perUser}
}

type keyScan struct {
	id, name, start, hash, orgID string
	createdBy                    *string
	enabled                      bool
	expiresAt, lastRequest       *time.Time
	createdAt, updatedAt         time.Time
}

func (k *keyScan) dest() []any {
	return []any{&k.id, &k.name, &k.start, &k.hash, &k.orgID, &k.createdBy, &k.enabled, &k.expiresAt, &k.lastRequest, &k.createdAt, &k.updatedAt}
}

func (k *keyScan) entity() *apikey.APIKey {
	return apikey.UnmarshalFromDatabase(k.id, k.name, k.start, k.hash, k.orgID, fromNullString(k.createdBy), k.enabled,
		fromNullTime(k.expiresAt), fromNullTime(k.lastRequest), k.createdAt, k.updatedAt)
}

func addKey(ctx context.Context, q querier, k *apikey.APIKey) error {
	_, err := q.Exec(ctx, insertKey, k.ID(), k.Name(), k.Start(), k.Hash(), k.OrganizationID(), nullString(k.CreatedBy()), k.Enabled(),
		nullTime(k.ExpiresAt()), nullTime(k.LastRequest()), k.CreatedAt(), k.UpdatedAt())
	if err != nil {
		return fmt.Errorf("insert key: %w", err)
	}
	return nil
}

// Add implements apikey.Repository: the organization's row is locked, then its creator's
// (the order OrganizationRepository.Update keeps), and the key is inserted only when both
// have room.
func (r *KeyRepository) Add(ctx context.Context, k *apikey.APIKey) error {
	return pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		ok, err := hasRoom(ctx, tx, lockOrganizationRow, countKeysOfOrg, k.OrganizationID(), r.perOrg)
		if err != nil {
			return err
		}
		if !ok {
			return apikey.ErrTooManyKeys
		}
		if k.CreatedBy() != "" {
			ok, err := hasRoom(ctx, tx, lockUserRow, countKeysOfUser, k.CreatedBy(), r.perUser)
			if err != nil {
				return err
			}
			if !ok {
				return apikey.ErrTooManyKeysOfUser
			}
		}
		return addKey(ctx, tx, k)
	})
}

func (r *KeyRepository) one(ctx context.Context, query, arg string) (*apikey.APIKey, error) {
	var k keyScan
	if err := r.pool.QueryRow(ctx, query, arg).Scan(k.dest()...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, apikey.ErrNotFound
		}
		return nil, fmt.Errorf("get key: %w", err)
	}
	return k.entity(), nil
}

// Get implements apikey.Repository.
func (r *KeyRepository) Get(ctx context.Context, id string) (*apikey.APIKey, error) {
	return r.one(ctx, selectKeyByID, id)
}

// ByHash implements apikey.Repository.
func (r *KeyRepository) ByHash(ctx context.Context, hash string) (*apikey.APIKey, error) {
	return r.one(ctx, selectKeyByHash, hash)
}

// Authenticate implements port.Keys.
func (r *KeyRepository) Authenticate(ctx context.Context, hash string) (port.KeyRecord, error) {
	var (
		k                keyScan
		uid, email, name *string
	)
	if err := r.pool.QueryRow(ctx, authenticateKey, hash).Scan(append(k.dest(), &uid, &email, &name)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return port.KeyRecord{}, apikey.ErrNotFound
		}
		return port.KeyRecord{}, fmt.Errorf("authenticate key: %w", err)
	}
	return port.KeyRecord{Key: k.entity(), Creator: org.Person{ID: fromNullString(uid), Email: fromNullString(email), Name: fromNullString(name)}}, nil
}

// ListByOrganization implements apikey.Repository.
func (r *KeyRepository) ListByOrganization(ctx context.Context, organizationID string) ([]*apikey.APIKey, error) {
	rows, err := r.pool.Query(ctx, selectKeysOfOrg, organizationID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*apikey.APIKey, error) {
		var k keyScan
		if err := row.Scan(k.dest()...); err != nil {
			return nil, err
		}
		return k.entity(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	if out == nil {
		out = []*apikey.APIKey{}
	}
	return out, nil
}

// Delete implements apikey.Repository.
func (r *KeyRepository) Delete(ctx context.Context, id string) error {
	tag, err := r.pool.Exec(ctx, deleteKey, id)
	if err != nil {
		return fmt.Errorf("delete key %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return apikey.ErrNotFound
	}
	return nil
}

// Touch implements apikey.Repository.
func (r *KeyRepository) Touch(ctx context.Context, uses map[string]time.Time) error {
	if len(uses) == 0 {
		return nil
	}
	ids := make([]string, 0, len(uses))
	ats := make([]time.Time, 0, len(uses))
	for id, at := range uses {
		ids, ats = append(ids, id), append(ats, at)
	}
	if _, err := r.pool.Exec(ctx, touchKeys, ids, ats); err != nil {
		return fmt.Errorf("touch keys: %w", err)
	}
	return nil
}
