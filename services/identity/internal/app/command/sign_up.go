package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// SignUp registers a person with a password.
type SignUp struct {
	Email     string
	Password  string
	Name      string
	IPAddress string
	UserAgent string
}

// SignUpHandler creates the user, its credential, a personal organization with the user as
// owner, and a first session with that organization active — all in one transaction. Each
// client address may sign up a limited number of times a minute: every sign-up costs an
// argon2id hash.
type SignUpHandler struct {
	registrar port.Registrar
	hasher    port.PasswordHasher
	limiter   port.AttemptLimiter
	now       func() time.Time
}

// NewSignUpHandler returns the handler.
func NewSignUpHandler(registrar port.Registrar, hasher port.PasswordHasher, limiter port.AttemptLimiter, now func() time.Time) SignUpHandler {
	if registrar == nil || hasher == nil || limiter == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return SignUpHandler{registrar: registrar, hasher: hasher, limiter: limiter, now: now}
}

// SignUpKey is the limiter key of sign-ups from ip.
func SignUpKey(ip string) string { return "sign-up:" + ip }

// Handle signs the person up; user.ErrEmailTaken when the address is in use,
// *auth.RateLimitedError past the address's limit. The request is checked in full before
// the password is hashed.
func (h SignUpHandler) Handle(ctx context.Context, cmd SignUp) (SessionResult, error) {
	if _, err := user.NormalizeEmail(cmd.Email); err != nil {
		return SessionResult{}, err
	}
	if err := user.CheckPassword(cmd.Password); err != nil {
		return SessionResult{}, err
	}
	if err := user.CheckName(cmd.Name); err != nil {
		return SessionResult{}, err
	}
	if ok, retry := h.limiter.Allow(ctx, SignUpKey(cmd.IPAddress)); !ok {
		return SessionResult{}, &auth.RateLimitedError{RetryAfter: retry}
	}
	hash, err := h.hasher.Hash(ctx, cmd.Password)
	if err != nil {
		return SessionResult{}, fmt.Errorf("hash password: %w", err)
	}
	now := h.now()
	u, err := user.New(cmd.Email, cmd.Name, hash, now)
	if err != nil {
		return SessionResult{}, err
	}
	// A personal slug has 36^8 values; a collision is rare enough that a few draws settle it.
	for range 3 {
		o, err := org.NewPersonal("", person(u), now)
		if err != nil {
			return SessionResult{}, err
		}
		s, tok := session.New(u.ID(), o.ID(), cmd.IPAddress, cmd.UserAgent, now)
		err = h.registrar.Register(ctx, port.Registration{User: u, Organization: o, Session: s})
		if errors.Is(err, org.ErrSlugTaken) {
			continue
		}
		if err != nil {
			return SessionResult{}, fmt.Errorf("register: %w", err)
		}
		return SessionResult{User: u, Session: s, Token: tok}, nil
	}
	return SessionResult{}, errors.New("register: no free personal slug after 3 draws")
}
