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
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

const (
	sessionColumns = `s.id, s.token_hash, s.user_id, s.active_organization_id, s.active_organization_cleared,
		s.expires_at, s.ip_address, s.user_agent, s.created_at, s.updated_at`
	insertSession = `INSERT INTO sessions (id, token_hash, user_id, active_organization_id, active_organization_cleared,
		expires_at, ip_address, user_agent, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	// authenticateSession is the request path: one lookup by the unique token hash, joined by
	// primary and unique keys to the user, its credential and its membership of the active
	// organization.
	authenticateSession = `SELECT ` + sessionColumns + `,
		u.id, u.email, u.name, u.email_verified, a.password_hash, u.created_at, u.updated_at, m.role
		FROM sessions s
		JOIN users u ON u.id = s.user_id
		JOIN accounts a ON a.user_id = u.id AND a.provider_id = 'credential'
		LEFT JOIN members m ON m.organization_id = s.active_organization_id AND m.user_id = s.user_id
		WHERE s.token_hash = $1`
	selectSessionForUpdate = `SELECT ` + sessionColumns + ` FROM sessions s WHERE s.id = $1 FOR UPDATE`
	updateSession          = `UPDATE sessions SET active_organization_id = $2, active_organization_cleared = $3,
		expires_at = $4, updated_at = $5 WHERE id = $1`
	// extendSession never moves an expiry backwards, so concurrent refreshes need no lock.
	extendSession = `UPDATE sessions SET expires_at = $2, updated_at = $3 WHERE id = $1 AND expires_at < $2`
	deleteSession = `DELETE FROM sessions WHERE id = $1`
)

// SessionRepository implements port.Sessions.
type SessionRepository struct{ pool *pgxpool.Pool }

// NewSessionRepository returns the repository.
func NewSessionRepository(pool *pgxpool.Pool) *SessionRepository {
	return &SessionRepository{pool: pool}
}

func addSession(ctx context.Context, q querier, s *session.Session) error {
	_, err := q.Exec(ctx, insertSession, s.ID(), s.TokenHash(), s.UserID(), nullString(s.ActiveOrganizationID()), s.ActiveCleared(),
		s.ExpiresAt(), s.IPAddress(), s.UserAgent(), s.CreatedAt(), s.UpdatedAt())
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// Add implements session.Repository.
func (r *SessionRepository) Add(ctx context.Context, s *session.Session) error {
	return addSession(ctx, r.pool, s)
}

type sessionScan struct {
	id, userID, ip, ua   string
	hash                 []byte
	activeOrg            *string
	cleared              bool
	expiresAt            time.Time
	createdAt, updatedAt time.Time
}

func (s *sessionScan) dest() []any {
	return []any{&s.id, &s.hash, &s.userID, &s.activeOrg, &s.cleared, &s.expiresAt, &s.ip, &s.ua, &s.createdAt, &s.updatedAt}
}

func (s *sessionScan) entity() *session.Session {
	return session.UnmarshalFromDatabase(s.id, s.hash, s.userID, fromNullString(s.activeOrg), s.cleared, s.expiresAt, s.ip, s.ua, s.createdAt, s.updatedAt)
}

// Authenticate implements port.Sessions.
func (r *SessionRepository) Authenticate(ctx context.Context, tokenHash []byte) (port.SessionRecord, error) {
	var (
		s                    sessionScan
		uid, email, name     string
		verified             bool
		pwHash, role         *string
		createdAt, updatedAt time.Time
	)
	dest := append(s.dest(), &uid, &email, &name, &verified, &pwHash, &createdAt, &updatedAt, &role)
	if err := r.pool.QueryRow(ctx, authenticateSession, tokenHash).Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return port.SessionRecord{}, session.ErrNotFound
		}
		return port.SessionRecord{}, fmt.Errorf("authenticate session: %w", err)
	}
	return port.SessionRecord{
		Session: s.entity(),
		User:    user.UnmarshalFromDatabase(uid, email, name, verified, fromNullString(pwHash), createdAt, updatedAt),
		Role:    org.Role(fromNullString(role)),
	}, nil
}

// Update implements session.Repository.
func (r *SessionRepository) Update(ctx context.Context, id string, updateFunc func(context.Context, *session.Session) error) error {
	return pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		var s sessionScan
		if err := tx.QueryRow(ctx, selectSessionForUpdate, id).Scan(s.dest()...); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("update session %s: %w", id, session.ErrNotFound)
			}
			return fmt.Errorf("update session %s: %w", id, err)
		}
		x := s.entity()
		if err := updateFunc(ctx, x); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, updateSession, id, nullString(x.ActiveOrganizationID()), x.ActiveCleared(), x.ExpiresAt(), x.UpdatedAt())
		if err != nil {
			return fmt.Errorf("update session %s: %w", id, err)
		}
		return nil
	})
}

// Extend implements session.Repository.
func (r *SessionRepository) Extend(ctx context.Context, id string, expiresAt time.Time) error {
	if _, err := r.pool.Exec(ctx, extendSession, id, expiresAt, expiresAt.Add(-session.Lifetime)); err != nil {
		return fmt.Errorf("extend session %s: %w", id, err)
	}
	return nil
}

// Delete implements session.Repository.
func (r *SessionRepository) Delete(ctx context.Context, id string) error {
	if _, err := r.pool.Exec(ctx, deleteSession, id); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}
