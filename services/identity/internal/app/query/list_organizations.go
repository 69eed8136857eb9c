package query

import (
	"context"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/domain/org"
)

// ListOrganizations lists the caller's organizations.
type ListOrganizations struct{ Caller auth.Caller }

// ListOrganizationsHandler lists them in the order the caller joined.
type ListOrganizationsHandler struct{ orgs org.Repository }

// NewListOrganizationsHandler returns the handler.
func NewListOrganizationsHandler(orgs org.Repository) ListOrganizationsHandler {
	if orgs == nil {
		panic("nil dependency")
	}
	return ListOrganizationsHandler{orgs: orgs}
}

// Handle lists.
func (h ListOrganizationsHandler) Handle(ctx context.Context, q ListOrganizations) ([]org.Profile, error) {
	rec, err := q.Caller.RequireSession()
	if err != nil {
		return nil, err
	}
	return h.orgs.ListForUser(ctx, rec.User.ID())
}
