// Package port declares what identity's use cases need from the outside world: storage
// beyond the single-aggregate repositories of the domain (joined reads for the request path,
// the sign-up transaction, reset tokens), password hashing, mail, the sign-in attempt limiter
// and the recorder of API key use. Adapters implement them; app tests use the in-memory ones.
package port

import (
	"context"
	"errors"
	"time"

	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// ErrUsersExist is returned by a registration that required an empty user store.
var ErrUsersExist = errors.New("users exist")

// ErrResetTokenNotFound is returned for a reset token that is unknown, used or expired.
var ErrResetTokenNotFound = errors.New("reset token not found")

// Registration is everything a sign-up (or the bootstrap) creates, stored in one
// transaction: the user with its password credential, its organization with the owner
// membership, and optionally a first session and a first API key.
type Registration struct {
	User         *user.User
	Organization *org.Organization
	Session      *session.Session
	APIKey       *apikey.APIKey
	// OnlyIfNoUsers makes the registration fail with ErrUsersExist unless the user store is
	// empty, decided atomically (the bootstrap).
	OnlyIfNoUsers bool
}

// Registrar stores registrations. A taken email is user.ErrEmailTaken.
type Registrar interface {
	Register(ctx context.Context, r Registration) error
	// AnyUsers reports whether the user store holds anyone.
	AnyUsers(ctx context.Context) (bool, error)
}

// SessionRecord is a live session with its user and the user's role in the session's
// active organization ("" when there is no active organization or the user is no longer a
// member of it).
type SessionRecord struct {
	Session *session.Session
	User    *user.User
	Role    org.Role
}

// Sessions stores sessions and answers the request path's question in one indexed lookup.
type Sessions interface {
	session.Repository
	// Authenticate finds the session whose token hashes to tokenHash, with its user and
	// active role; session.ErrNotFound when there is none (expiry is the caller's check).
	Authenticate(ctx context.Context, tokenHash []byte) (SessionRecord, error)
}

// KeyRecord is a key with the person who created it (zero when unknown or deleted).
type KeyRecord struct {
	Key     *apikey.APIKey
	Creator org.Person
}

// Keys stores API keys and finds one by the hash of its raw value in one indexed lookup.
type Keys interface {
	apikey.Repository
	Authenticate(ctx context.Context, hash string) (KeyRecord, error)
}

// ResetTokens stores one-time password-reset tokens, hashed.
type ResetTokens interface {
	Add(ctx context.Context, userID, hash string, expiresAt time.Time) error
	// Consume deletes the token and returns its user when it is live at now; otherwise
	// ErrResetTokenNotFound. A token is usable once.
	Consume(ctx context.Context, hash string, now time.Time) (userID string, err error)
}

// PasswordHasher hashes passwords into self-describing encoded strings.
type PasswordHasher interface {
	Hash(password string) (string, error)
	// Verify compares in constant time; an encoded value it cannot read is an error.
	Verify(password, encoded string) (bool, error)
}

// Mailer sends the mails identity needs. The dev adapter logs them.
type Mailer interface {
	SendPasswordReset(ctx context.Context, email, link string) error
	SendInvitation(ctx context.Context, email, organizationName, link string) error
}

// AttemptLimiter decides whether one more attempt under key is allowed now.
type AttemptLimiter interface {
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration)
}

// KeyUsage remembers that a key was used at a time, to be written later in a batch: the
// request path never waits for a write to keep lastRequest fresh.
type KeyUsage interface {
	Record(keyID string, at time.Time)
}

// Repositories is every store the use cases use.
type Repositories struct {
	Users         user.Repository
	Sessions      Sessions
	Organizations org.Repository
	Keys          Keys
	ResetTokens   ResetTokens
	Registrar     Registrar
}

// Validate panics on a missing store: a wiring mistake, not a runtime failure.
func (r Repositories) Validate() {
	if r.Users == nil || r.Sessions == nil || r.Organizations == nil || r.Keys == nil || r.ResetTokens == nil || r.Registrar == nil {
		panic("port: incomplete repositories")
	}
}
