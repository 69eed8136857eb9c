package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// Bootstrap creates the first user of an empty system, with an organization, a session and
// an API key, so that an operator can start without the sign-up flow.
type Bootstrap struct {
	Email            string
	Password         string
	Name             string
	OrganizationName string
	IPAddress        string
	UserAgent        string
}

// BootstrapResult is everything the bootstrap created, with the raw session token and key.
type BootstrapResult struct {
	User         *user.User
	Organization *org.Organization
	Session      *session.Session
	Token        session.Token
	Key          *apikey.APIKey
	RawKey       string
}

// BootstrapHandler works only while it is enabled (SVC_BOOTSTRAP=1) and the user store is
// empty; the emptiness check and the inserts are one transaction, so two racing calls
// cannot both succeed. Otherwise auth.ErrBootstrapClosed.
type BootstrapHandler struct {
	registrar port.Registrar
	hasher    port.PasswordHasher
	enabled   bool
	now       func() time.Time
}

// NewBootstrapHandler returns the handler.
func NewBootstrapHandler(registrar port.Registrar, hasher port.PasswordHasher, enabled bool, now func() time.Time) BootstrapHandler {
	if registrar == nil || hasher == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return BootstrapHandler{registrar: registrar, hasher: hasher, enabled: enabled, now: now}
}

// Open reports whether a bootstrap could succeed now.
func (h BootstrapHandler) Open(ctx context.Context) (bool, error) {
	if !h.enabled {
		return false, nil
	}
	taken, err := h.registrar.AnyUsers(ctx)
	if err != nil {
		return false, fmt.Errorf("count users: %w", err)
	}
	return !taken, nil
}

// Handle bootstraps.
func (h BootstrapHandler) Handle(ctx context.Context, cmd Bootstrap) (BootstrapResult, error) {
	open, err := h.Open(ctx)
	if err != nil {
		return BootstrapResult{}, err
	}
	if !open {
		return BootstrapResult{}, auth.ErrBootstrapClosed
	}
	if _, err := user.NormalizeEmail(cmd.Email); err != nil {
		return BootstrapResult{}, err
	}
	if err := user.CheckPassword(cmd.Password); err != nil {
		return BootstrapResult{}, err
	}
	if err := user.CheckName(cmd.Name); err != nil {
		return BootstrapResult{}, err
	}
	hash, err := h.hasher.Hash(ctx, cmd.Password)
	if err != nil {
		return BootstrapResult{}, fmt.Errorf("hash password: %w", err)
	}
	now := h.now()
	u, err := user.New(cmd.Email, cmd.Name, hash, now)
	if err != nil {
		return BootstrapResult{}, err
	}
	o, err := org.NewPersonal(cmd.OrganizationName, person(u), now)
	if err != nil {
		return BootstrapResult{}, err
	}
	s, tok := session.New(u.ID(), o.ID(), cmd.IPAddress, cmd.UserAgent, now)
	k, raw, err := apikey.New("bootstrap", o.ID(), u.ID(), 0, now)
	if err != nil {
		return BootstrapResult{}, err
	}
	err = h.registrar.Register(ctx, port.Registration{User: u, Organization: o, Session: s, APIKey: k, OnlyIfNoUsers: true})
	if errors.Is(err, port.ErrUsersExist) {
		return BootstrapResult{}, auth.ErrBootstrapClosed
	}
	if err != nil {
		return BootstrapResult{}, fmt.Errorf("register: %w", err)
	}
	return BootstrapResult{User: u, Organization: o, Session: s, Token: tok, Key: k, RawKey: raw}, nil
}
