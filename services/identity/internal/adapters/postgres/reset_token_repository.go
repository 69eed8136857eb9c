package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/user"
)

// Reset tokens live in verifications with identifier "reset-password:<user id>".
const (
	resetIdentifier = "reset-password:"
	// insertResetToken also drops the user's expired tokens, so the table does not grow.
	pruneResetTokens = `DELETE FROM verifications WHERE identifier = $1 AND expires_at < $2`
	insertResetToken = `INSERT INTO verifications (id, identifier, value_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)`
	lookupResetToken = `SELECT identifier FROM verifications WHERE value_hash = $1 AND identifier LIKE 'reset-password:%'
		AND expires_at > $2`
	// consumeResetToken uses the token up whatever its state: a token is tried once.
	consumeResetToken = `DELETE FROM verifications WHERE value_hash = $1 AND identifier LIKE 'reset-password:%'
		RETURNING identifier, expires_at`
	// deleteResetTokensOfUser goes with every password change (updateUser).
	deleteResetTokensOfUser = `DELETE FROM verifications WHERE identifier = $1`
)

// ResetTokenRepository implements port.ResetTokens.
type ResetTokenRepository struct{ pool *pgxpool.Pool }

// NewResetTokenRepository returns the repository.
func NewResetTokenRepository(pool *pgxpool.Pool) *ResetTokenRepository {
	return &ResetTokenRepository{pool: pool}
}

// Add implements port.ResetTokens.
func (r *ResetTokenRepository) Add(ctx context.Context, userID, hash string, expiresAt time.Time) error {
	now := time.Now().UTC()
	if _, err := r.pool.Exec(ctx, pruneResetTokens, resetIdentifier+userID, now); err != nil {
		return fmt.Errorf("prune reset tokens: %w", err)
	}
	if _, err := r.pool.Exec(ctx, insertResetToken, wire.NewID("ver"), resetIdentifier+userID, hash, expiresAt, now); err != nil {
		return fmt.Errorf("insert reset token: %w", err)
	}
	return nil
}

// Lookup implements port.ResetTokens.
func (r *ResetTokenRepository) Lookup(ctx context.Context, hash string, now time.Time) (string, error) {
	var identifier string
	if err := r.pool.QueryRow(ctx, lookupResetToken, hash, now).Scan(&identifier); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", port.ErrResetTokenNotFound
		}
		return "", fmt.Errorf("look up reset token: %w", err)
	}
	return strings.TrimPrefix(identifier, resetIdentifier), nil
}

// Redeem implements port.ResetTokens: the token's DELETE, the password, the sessions and the
// user's other tokens commit together. An expired token's DELETE commits alone.
func (r *ResetTokenRepository) Redeem(ctx context.Context, hash string, now time.Time, updateFunc func(context.Context, *user.User) error) error {
	expired := false
	err := pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		var (
			identifier string
			expiresAt  time.Time
		)
		if err := tx.QueryRow(ctx, consumeResetToken, hash).Scan(&identifier, &expiresAt); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return port.ErrResetTokenNotFound
			}
			return fmt.Errorf("consume reset token: %w", err)
		}
		if !now.Before(expiresAt) {
			expired = true
			return nil
		}
		return updateUser(ctx, tx, strings.TrimPrefix(identifier, resetIdentifier), updateFunc)
	})
	if err == nil && expired {
		return port.ErrResetTokenNotFound
	}
	return err
}
