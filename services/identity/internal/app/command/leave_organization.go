package command

import (
	"context"
	"errors"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/domain/org"
)

// LeaveOrganization removes the caller's own membership.
type LeaveOrganization struct {
	Caller         auth.Caller
	OrganizationID string
}

// LeaveOrganizationHandler lets a member leave; the only owner cannot. A session whose active
// organization was the one left answers no_active_organization until set-active is called.
type LeaveOrganizationHandler struct{ orgs org.Repository }

// NewLeaveOrganizationHandler returns the handler.
func NewLeaveOrganizationHandler(orgs org.Repository) LeaveOrganizationHandler {
	if orgs == nil {
		panic("nil dependency")
	}
	return LeaveOrganizationHandler{orgs: orgs}
}

// Handle leaves.
func (h LeaveOrganizationHandler) Handle(ctx context.Context, cmd LeaveOrganization) (org.Membership, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return org.Membership{}, err
	}
	if cmd.OrganizationID == "" {
		return org.Membership{}, auth.Invalid("organizationId", "is required")
	}
	if !wire.ValidID(wire.Organization, cmd.OrganizationID) {
		return org.Membership{}, org.ErrNotMember
	}
	var left org.Membership
	err = h.orgs.Update(ctx, cmd.OrganizationID, func(_ context.Context, o *org.Organization) error {
		var err error
		left, err = o.Leave(rec.User.ID())
		return err
	})
	if errors.Is(err, org.ErrNotFound) {
		return org.Membership{}, org.ErrNotMember
	}
	return left, err
}
