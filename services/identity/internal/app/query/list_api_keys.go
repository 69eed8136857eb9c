package query

import (
	"context"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
)

// ListAPIKeys lists the keys of the caller's active organization (or the one named).
type ListAPIKeys struct {
	Caller         auth.Caller
	OrganizationID string
}

// ListAPIKeysHandler needs a session whose role is owner or admin; a request carrying an API
// key is refused. Keys never come back with their raw value: it is not stored.
type ListAPIKeysHandler struct {
	orgs org.Repository
	keys port.Keys
}

// NewListAPIKeysHandler returns the handler.
func NewListAPIKeysHandler(orgs org.Repository, keys port.Keys) ListAPIKeysHandler {
	if orgs == nil || keys == nil {
		panic("nil dependency")
	}
	return ListAPIKeysHandler{orgs: orgs, keys: keys}
}

// Handle lists, oldest first.
func (h ListAPIKeysHandler) Handle(ctx context.Context, q ListAPIKeys) ([]*apikey.APIKey, error) {
	rec, err := q.Caller.RequireKeyManager()
	if err != nil {
		return nil, err
	}
	o, m, err := auth.ActiveOrganization(ctx, h.orgs, rec, q.OrganizationID)
	if err != nil {
		return nil, err
	}
	if !m.Role.Manages() {
		return nil, org.ErrForbidden
	}
	return h.keys.ListByOrganization(ctx, o.ID())
}
