package command

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/secret"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// SignIn starts a session with an email and password.
type SignIn struct {
	Email     string
	Password  string
	IPAddress string
	UserAgent string
}

// SignInHandler checks the attempt limit for (IP, email), then the password, then starts a
// session; a user with exactly one membership gets it as the active organization.
type SignInHandler struct {
	users    user.Repository
	orgs     org.Repository
	sessions port.Sessions
	hasher   port.PasswordHasher
	limiter  port.AttemptLimiter
	now      func() time.Time
}

// NewSignInHandler returns the handler.
func NewSignInHandler(users user.Repository, orgs org.Repository, sessions port.Sessions, hasher port.PasswordHasher,
	limiter port.AttemptLimiter, now func() time.Time,
) SignInHandler {
	if users == nil || orgs == nil || sessions == nil || hasher == nil || limiter == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return SignInHandler{users: users, orgs: orgs, sessions: sessions, hasher: hasher, limiter: limiter, now: now}
}

// AttemptKey is the limiter key of sign-in attempts for (ip, email). The address is hashed so
// that no email lands in Redis.
func AttemptKey(ip, email string) string {
	return "sign-in:" + ip + ":" + hex.EncodeToString(secret.SHA256(email))[:32]
}

// Handle signs in: user.ErrNotFound for an unknown address, auth.ErrInvalidCredentials for a
// wrong password, *auth.RateLimitedError past 10 attempts a minute.
func (h SignInHandler) Handle(ctx context.Context, cmd SignIn) (SessionResult, error) {
	email, err := user.NormalizeEmail(cmd.Email)
	if err != nil {
		return SessionResult{}, err
	}
	if cmd.Password == "" {
		return SessionResult{}, auth.Invalid("password", "is required")
	}
	if ok, retry := h.limiter.Allow(ctx, AttemptKey(cmd.IPAddress, email)); !ok {
		return SessionResult{}, &auth.RateLimitedError{RetryAfter: retry}
	}
	u, err := h.users.ByEmail(ctx, email)
	if err != nil {
		return SessionResult{}, err
	}
	ok, err := h.hasher.Verify(ctx, cmd.Password, u.PasswordHash())
	if err != nil {
		return SessionResult{}, fmt.Errorf("verify password: %w", err)
	}
	if !ok {
		return SessionResult{}, auth.ErrInvalidCredentials
	}
	active := ""
	if m, ok, err := h.orgs.OnlyMembership(ctx, u.ID()); err != nil {
		return SessionResult{}, fmt.Errorf("only membership: %w", err)
	} else if ok {
		active = m.OrganizationID
	}
	s, tok := session.New(u.ID(), active, cmd.IPAddress, cmd.UserAgent, h.now())
	if err := h.sessions.Add(ctx, s); err != nil {
		return SessionResult{}, fmt.Errorf("add session: %w", err)
	}
	return SessionResult{User: u, Session: s, Token: tok}, nil
}
