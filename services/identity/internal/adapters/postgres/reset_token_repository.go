package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/port"
)

// Reset tokens live in verifications with identifier "reset-password:<user id>".
const (
	resetIdentifier = "reset-password:"
	// insertResetToken also drops the user's expired tokens, so the table does not grow.
	pruneResetTokens = `DELETE FROM verifications WHERE identifier = $1 AND expires_at < $2`
	insertResetToken = `INSERT INTO verifications (id, identifier, value_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)`
	// consumeResetToken uses the token up whatever its state: a token is tried once.
	consumeResetToken = `DELETE FROM verifications WHERE value_hash = $1 AND identifier LIKE 'reset-password:%'
		RETURNING identifier, expires_at`
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

// Consume implements port.ResetTokens.
func (r *ResetTokenRepository) Consume(ctx context.Context, hash string, now time.Time) (string, error) {
	var (
		identifier string
		expiresAt  time.Time
	)
	if err := r.pool.QueryRow(ctx, consumeResetToken, hash).Scan(&identifier, &expiresAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", port.ErrResetTokenNotFound
		}
		return "", fmt.Errorf("consume reset token: %w", err)
	}
	if !now.Before(expiresAt) {
		return "", port.ErrResetTokenNotFound
	}
	return strings.TrimPrefix(identifier, resetIdentifier), nil
}
