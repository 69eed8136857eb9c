package query

import (
	"context"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/domain/org"
)

// ListMembers lists the members of the caller's active organization (or the one named).
type ListMembers struct {
	Caller         auth.Caller
	OrganizationID string
}

// ListMembersHandler lets any member list the members.
type ListMembersHandler struct{ orgs org.Repository }

// NewListMembersHandler returns the handler.
func NewListMembersHandler(orgs org.Repository) ListMembersHandler {
	if orgs == nil {
		panic("nil dependency")
	}
	return ListMembersHandler{orgs: orgs}
}

// Handle lists, oldest membership first.
func (h ListMembersHandler) Handle(ctx context.Context, q ListMembers) ([]org.Membership, error) {
	rec, err := q.Caller.RequireSession()
	if err != nil {
		return nil, err
	}
	o, _, err := auth.ActiveOrganization(ctx, h.orgs, rec, q.OrganizationID)
	if err != nil {
		return nil, err
	}
	return o.Members(), nil
}
