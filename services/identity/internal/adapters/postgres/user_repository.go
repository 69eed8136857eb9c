package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/services/identity/internal/domain/user"
)

// A user and its password credential, read together.
const (
	selectUser = `SELECT u.id, u.email, u.name, u.email_verified, a.password_hash, u.created_at, u.updated_at
		FROM users u JOIN accounts a ON a.user_id = u.id AND a.provider_id = 'credential'`
	selectUserByID       = selectUser + ` WHERE u.id = $1`
	selectUserByEmail    = selectUser + ` WHERE lower(u.email) = lower($1)`
	selectUserForUpdate  = selectUser + ` WHERE u.id = $1 FOR UPDATE OF u, a`
	updateUserTouched    = `UPDATE users SET updated_at = $2 WHERE id = $1`
	updateUserPassword   = `UPDATE accounts SET password_hash = $2, updated_at = $3 WHERE user_id = $1 AND provider_id = 'credential'`
	deleteSessionsOfUser = `DELETE FROM sessions WHERE user_id = $1`
	insertUser           = `INSERT INTO users (id, email, name, email_verified, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)`
	insertCredential     = `INSERT INTO accounts (id, user_id, provider_id, account_id, password_hash, created_at, updated_at) VALUES ($1, $2, 'credential', $2, $3, $4, $4)`
	usersEmailKey        = "users_email_key"
)

// UserRepository implements user.Repository.
type UserRepository struct{ pool *pgxpool.Pool }

// NewUserRepository returns the repository.
func NewUserRepository(pool *pgxpool.Pool) *UserRepository { return &UserRepository{pool: pool} }

func scanUser(row pgx.Row) (*user.User, error) {
	var (
		id, email, name      string
		verified             bool
		hash                 *string
		createdAt, updatedAt time.Time
	)
	if err := row.Scan(&id, &email, &name, &verified, &hash, &createdAt, &updatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, user.ErrNotFound
		}
		return nil, err
	}
	return user.UnmarshalFromDatabase(id, email, name, verified, fromNullString(hash), createdAt, updatedAt), nil
}

// Get implements user.Repository.
func (r *UserRepository) Get(ctx context.Context, id string) (*user.User, error) {
	u, err := scanUser(r.pool.QueryRow(ctx, selectUserByID, id))
	if err != nil {
		return nil, fmt.Errorf("get user %s: %w", id, err)
	}
	return u, nil
}

// ByEmail implements user.Repository.
func (r *UserRepository) ByEmail(ctx context.Context, email string) (*user.User, error) {
	u, err := scanUser(r.pool.QueryRow(ctx, selectUserByEmail, email))
	if err != nil {
		return nil, fmt.Errorf("get user by email: %w", err)
	}
	return u, nil
}

// Update implements user.Repository: the password and, when asked, the revocation of every
// session of the user commit together, and with a new password every reset token of the
// user is deleted in the same transaction.
func (r *UserRepository) Update(ctx context.Context, id string, updateFunc func(context.Context, *user.User) error) error {
	return pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error { return updateUser(ctx, tx, id, updateFunc) })
}

// updateUser is Update inside tx, which reset-token redemption shares.
func updateUser(ctx context.Context, tx pgx.Tx, id string, updateFunc func(context.Context, *user.User) error) error {
	u, err := scanUser(tx.QueryRow(ctx, selectUserForUpdate, id))
	if err != nil {
		return fmt.Errorf("update user %s: %w", id, err)
	}
	if err := updateFunc(ctx, u); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, updateUserPassword, id, u.PasswordHash(), u.UpdatedAt()); err != nil {
		return fmt.Errorf("update password: %w", err)
	}
	if _, err := tx.Exec(ctx, updateUserTouched, id, u.UpdatedAt()); err != nil {
		return fmt.Errorf("update user: %w", err)
	}
	if u.RevokesSessions() {
		if _, err := tx.Exec(ctx, deleteSessionsOfUser, id); err != nil {
			return fmt.Errorf("revoke sessions: %w", err)
		}
	}
	if u.PasswordChanged() {
		if _, err := tx.Exec(ctx, deleteResetTokensOfUser, resetIdentifier+id); err != nil {
			return fmt.Errorf("delete reset tokens: %w", err)
		}
	}
	return nil
}
