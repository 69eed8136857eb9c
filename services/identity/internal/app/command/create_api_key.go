package command

import (
	"context"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
)

// CreateAPIKey mints a key for the caller's active organization (or the one named).
type CreateAPIKey struct {
	Caller         auth.Caller
	OrganizationID string
	Name           string
	// ExpiresIn is the key's lifetime; 0 means it never expires.
	ExpiresIn time.Duration
}

// CreateAPIKeyHandler needs a session whose role is owner or admin; a request that carries
// an API key is refused (a key cannot create keys).
type CreateAPIKeyHandler struct {
	orgs org.Repository
	keys port.Keys
	now  func() time.Time
}

// NewCreateAPIKeyHandler returns the handler.
func NewCreateAPIKeyHandler(orgs org.Repository, keys port.Keys, now func() time.Time) CreateAPIKeyHandler {
	if orgs == nil || keys == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return CreateAPIKeyHandler{orgs: orgs, keys: keys, now: now}
}

// Handle returns the stored key and its raw value, shown this once.
func (h CreateAPIKeyHandler) Handle(ctx context.Context, cmd CreateAPIKey) (*apikey.APIKey, string, error) {
	rec, err := cmd.Caller.RequireKeyManager()
	if err != nil {
		return nil, "", err
	}
	o, m, err := auth.ActiveOrganization(ctx, h.orgs, rec, cmd.OrganizationID)
	if err != nil {
		return nil, "", err
	}
	if !m.Role.Manages() {
		return nil, "", org.ErrForbidden
	}
	k, raw, err := apikey.New(cmd.Name, o.ID(), rec.User.ID(), cmd.ExpiresIn, h.now())
	if err != nil {
		return nil, "", err
	}
	if err := h.keys.Add(ctx, k); err != nil {
		return nil, "", fmt.Errorf("add key: %w", err)
	}
	return k, raw, nil
}
