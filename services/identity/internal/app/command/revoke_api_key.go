package command

import (
	"context"
	"errors"
	"fmt"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
)

// RevokeAPIKey deletes a key.
type RevokeAPIKey struct {
	Caller auth.Caller
	KeyID  string
}

// RevokeAPIKeyHandler needs a session whose role in the key's organization is owner or admin.
// A key of an organization the caller does not belong to is answered as not found. The key
// fails from the very next request on: nothing caches it.
type RevokeAPIKeyHandler struct {
	orgs org.Repository
	keys port.Keys
}

// NewRevokeAPIKeyHandler returns the handler.
func NewRevokeAPIKeyHandler(orgs org.Repository, keys port.Keys) RevokeAPIKeyHandler {
	if orgs == nil || keys == nil {
		panic("nil dependency")
	}
	return RevokeAPIKeyHandler{orgs: orgs, keys: keys}
}

// Handle revokes; apikey.ErrNotFound for a key that is unknown or foreign.
func (h RevokeAPIKeyHandler) Handle(ctx context.Context, cmd RevokeAPIKey) error {
	rec, err := cmd.Caller.RequireKeyManager()
	if err != nil {
		return err
	}
	if cmd.KeyID == "" {
		return auth.Invalid("keyId", "is required")
	}
	if !wire.ValidID(wire.APIKey, cmd.KeyID) {
		return apikey.ErrNotFound // not one of ours: no lookup needed
	}
	k, err := h.keys.Get(ctx, cmd.KeyID)
	if err != nil {
		return err
	}
	o, err := h.orgs.Get(ctx, k.OrganizationID())
	if errors.Is(err, org.ErrNotFound) {
		return apikey.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("get organization: %w", err)
	}
	m, err := o.Authorize(rec.User.ID())
	if err != nil {
		return apikey.ErrNotFound
	}
	if !m.Role.Manages() {
		return org.ErrForbidden
	}
	return h.keys.Delete(ctx, k.ID())
}
