// Package postgres stores identity's users, sessions, organizations, API keys and reset
// tokens in its own schema. Multi-row changes run in one transaction behind Update(fn) or
// Register; the request path's reads (a session with its user and active role, a key with its
// creator) are single indexed lookups.
package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/services/identity/internal/app/port"
)

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Repositories returns every store over pool, keeping c. The registrar does not check c: a
// registration makes a new user's first organization (and the bootstrap's first key), which
// every valid ceiling admits.
func Repositories(pool *pgxpool.Pool, c port.Ceilings) port.Repositories {
	if pool == nil {
		panic("nil pool")
	}
	c.Validate()
	return port.Repositories{
		Users:         NewUserRepository(pool),
		Sessions:      NewSessionRepository(pool),
		Organizations: NewOrganizationRepository(pool, c.OrganizationsPerUser),
		Keys:          NewKeyRepository(pool, c.KeysPerOrganization, c.KeysPerUser),
		ResetTokens:   NewResetTokenRepository(pool),
		Registrar:     NewRegistrar(pool),
	}
}

// uniqueViolation reports whether err broke the unique constraint or index named constraint.
func uniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// nullTime maps a zero time to SQL NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func fromNullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func fromNullString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
