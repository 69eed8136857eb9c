package command

import (
	"context"
	"errors"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/domain/org"
)

// RemoveMember removes a member, named by membership id or email, from the caller's active
// organization (or the one named).
type RemoveMember struct {
	Caller          auth.Caller
	OrganizationID  string
	MemberIDOrEmail string
}

// RemoveMemberHandler applies the organization's rules: owners and admins remove, only
// owners remove owners, the last owner stays. The removed user's sessions lose the
// organization at once (Resolve checks membership on every request).
type RemoveMemberHandler struct{ orgs org.Repository }

// NewRemoveMemberHandler returns the handler.
func NewRemoveMemberHandler(orgs org.Repository) RemoveMemberHandler {
	if orgs == nil {
		panic("nil dependency")
	}
	return RemoveMemberHandler{orgs: orgs}
}

// Handle removes and returns the membership.
func (h RemoveMemberHandler) Handle(ctx context.Context, cmd RemoveMember) (org.Membership, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return org.Membership{}, err
	}
	if cmd.MemberIDOrEmail == "" {
		return org.Membership{}, auth.Invalid("memberIdOrEmail", "is required")
	}
	orgID := cmd.OrganizationID
	if orgID == "" {
		orgID = rec.Session.ActiveOrganizationID()
	}
	if orgID == "" {
		return org.Membership{}, auth.ErrNoActiveOrganization
	}
	if !wire.ValidID(wire.Organization, orgID) {
		return org.Membership{}, org.ErrNotMember
	}
	var removed org.Membership
	err = h.orgs.Update(ctx, orgID, func(_ context.Context, o *org.Organization) error {
		var err error
		removed, err = o.Remove(rec.User.ID(), cmd.MemberIDOrEmail)
		return err
	})
	if errors.Is(err, org.ErrNotFound) {
		return org.Membership{}, org.ErrNotMember
	}
	return removed, err
}
