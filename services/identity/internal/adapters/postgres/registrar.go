package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/user"
)

const (
	anyUsers = `SELECT EXISTS (SELECT 1 FROM users)`
	// lockUsers blocks concurrent sign-ups (their inserts) until the bootstrap commits, and
	// waits for those in flight, so "the user store is empty" holds until the insert.
	lockUsers = `LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE`
)

// Registrar implements port.Registrar.
type Registrar struct{ pool *pgxpool.Pool }

// NewRegistrar returns the registrar.
func NewRegistrar(pool *pgxpool.Pool) *Registrar { return &Registrar{pool: pool} }

// AnyUsers implements port.Registrar.
func (r *Registrar) AnyUsers(ctx context.Context) (bool, error) {
	var found bool
	if err := r.pool.QueryRow(ctx, anyUsers).Scan(&found); err != nil {
		return false, fmt.Errorf("any users: %w", err)
	}
	return found, nil
}

// Register implements port.Registrar: user, credential, organization, owner membership,
// session and key commit together or not at all.
func (r *Registrar) Register(ctx context.Context, reg port.Registration) error {
	return pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		if reg.OnlyIfNoUsers {
			if _, err := tx.Exec(ctx, lockUsers); err != nil {
				return fmt.Errorf("lock users: %w", err)
			}
			var found bool
			if err := tx.QueryRow(ctx, anyUsers).Scan(&found); err != nil {
				return fmt.Errorf("any users: %w", err)
			}
			if found {
				return port.ErrUsersExist
			}
		}
		u := reg.User
		if _, err := tx.Exec(ctx, insertUser, u.ID(), u.Email(), u.Name(), u.EmailVerified(), u.CreatedAt(), u.UpdatedAt()); err != nil {
			if uniqueViolation(err, usersEmailKey) {
				return user.ErrEmailTaken
			}
			return fmt.Errorf("insert user: %w", err)
		}
		if _, err := tx.Exec(ctx, insertCredential, wire.NewID("acc"), u.ID(), u.PasswordHash(), u.CreatedAt()); err != nil {
			return fmt.Errorf("insert credential: %w", err)
		}
		if err := addOrganization(ctx, tx, reg.Organization); err != nil {
			return err
		}
		if reg.Session != nil {
			if err := addSession(ctx, tx, reg.Session); err != nil {
				return err
			}
		}
		if reg.APIKey != nil {
			if err := addKey(ctx, tx, reg.APIKey); err != nil {
				return err
			}
		}
		return nil
	})
}
