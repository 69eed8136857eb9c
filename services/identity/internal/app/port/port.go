// Package port declares what identity's use cases need from the outside world: storage
// beyond the single-aggregate repositories of the domain (joined reads for the request path,
// the sign-up transaction, reset tokens), password hashing, mail, the attempt limiters and
// the recorder of API key use. Adapters implement them; app tests use the in-memory ones.
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

// ErrHasherBusy is returned by a PasswordHasher that could not start within its wait because
// as many hashes as it allows were running: the client should retry shortly.
var ErrHasherBusy = errors.New("too many password hashes in progress")

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

// ResetTokens stores one-time password-reset tokens, hashed. A user's tokens also die with
// any change of its password (user.Repository.Update and Redeem delete them).
type ResetTokens interface {
	Add(ctx context.Context, userID, hash string, expiresAt time.Time) error
	// Lookup returns the user of the token when it is live at now, without using it up;
	// otherwise ErrResetTokenNotFound. It lets a bogus token be refused before anything
	// costly (hashing the new password) is done.
	Lookup(ctx context.Context, hash string, now time.Time) (userID string, err error)
	// Redeem uses the token up and, in the same transaction, loads its user under a row lock,
	// applies updateFunc and saves the user as user.Repository.Update does (sessions revoked
	// when asked, every reset token of the user deleted). A token that is unknown, used or
	// not live at now is ErrResetTokenNotFound (an expired one is used up all the same); when
	// updateFunc or the save fails nothing changes, and the token stays usable.
	Redeem(ctx context.Context, hash string, now time.Time, updateFunc func(ctx context.Context, u *user.User) error) error
}

// PasswordHasher hashes passwords into self-describing encoded strings. Either call may be
// refused with ErrHasherBusy, or end early with ctx.
type PasswordHasher interface {
	Hash(ctx context.Context, password string) (string, error)
	// Verify compares in constant time; an encoded value it cannot read is an error.
	Verify(ctx context.Context, password, encoded string) (bool, error)
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

// Limits are the attempt limiters of the routes a client can call over and over at a cost to
// the service (a password hash, a mail) or to a user (guessing a password). Each has its own
// budget; the use cases name their keys.
type Limits struct {
	// SignIn limits sign-in attempts per (client address, email).
	SignIn AttemptLimiter
	// SignUp limits sign-ups per client address.
	SignUp AttemptLimiter
	// PasswordReset limits request-password-reset and reset-password together, per client
	// address.
	PasswordReset AttemptLimiter
	// ChangePassword limits change-password attempts per user.
	ChangePassword AttemptLimiter
	// AcceptInvitation limits accept-invitation attempts per user and, under another key,
	// per client address.
	AcceptInvitation AttemptLimiter
}

// Validate panics on a missing limiter: a wiring mistake, not a runtime failure.
func (l Limits) Validate() {
	if l.SignIn == nil || l.SignUp == nil || l.PasswordReset == nil || l.ChangePassword == nil || l.AcceptInvitation == nil {
		panic("port: incomplete limits")
	}
}

// Ceilings bound what one principal can multiply itself into. The gateway keeps its rate
// limits and quotas per (organization, principal), so a user who could create organizations
// or API keys without end could also multiply those caps without end. The stores
// enforce the ceilings in the transaction that inserts, after a lock that serialises the
// counting (the organization's or the user's row), so concurrent creates never pass one
// together.
type Ceilings struct {
	// OrganizationsPerUser bounds the organizations a user belongs to: creating one, or
	// accepting an invitation to one, past it is org.ErrTooManyOrganizations. The personal
	// organization of sign-up counts. Like better-auth's organizationLimit it counts
	// memberships, and it also holds on accept, so that organizations handed over to one
	// account by others cannot pile up either.
	OrganizationsPerUser int
	// KeysPerOrganization bounds the API keys an organization holds (expired ones count until
	// they are deleted: they still take a row and a line of the list): apikey.ErrTooManyKeys.
	KeysPerOrganization int
	// KeysPerUser bounds the API keys a user has created across all organizations, still
	// stored: apikey.ErrTooManyKeysOfUser.
	KeysPerUser int
}

// DefaultCeilings are the ceilings of the settings' defaults.
func DefaultCeilings() Ceilings {
	return Ceilings{OrganizationsPerUser: 20, KeysPerOrganization: 100, KeysPerUser: 200}
}

// Validate panics on a ceiling below 1: a registration creates one organization (and the
// bootstrap one key), so no smaller ceiling can be kept. Settings are checked before this.
func (c Ceilings) Validate() {
	if c.OrganizationsPerUser < 1 || c.KeysPerOrganization < 1 || c.KeysPerUser < 1 {
		panic("port: ceilings must be at least 1")
	}
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
