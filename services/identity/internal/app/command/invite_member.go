package command

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/user"
)

// InviteMember invites an address into the caller's active organization (or the one named).
type InviteMember struct {
	Caller         auth.Caller
	OrganizationID string
	Email          string
	Role           string
	Resend         bool
}

// InviteMemberHandler records the invitation and mails its link. Only owners and admins
// invite, and only owners invite owners.
type InviteMemberHandler struct {
	orgs   org.Repository
	mailer port.Mailer
	link   func(invitationID string) string
	now    func() time.Time
	log    *slog.Logger
}

// NewInviteMemberHandler returns the handler; link builds the URL mailed for an invitation.
func NewInviteMemberHandler(orgs org.Repository, mailer port.Mailer, link func(invitationID string) string,
	now func() time.Time, log *slog.Logger,
) InviteMemberHandler {
	if orgs == nil || mailer == nil || link == nil || log == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return InviteMemberHandler{orgs: orgs, mailer: mailer, link: link, now: now, log: log}
}

// Handle invites.
func (h InviteMemberHandler) Handle(ctx context.Context, cmd InviteMember) (org.Invitation, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return org.Invitation{}, err
	}
	email, err := user.NormalizeEmail(cmd.Email)
	if err != nil {
		return org.Invitation{}, err
	}
	role, err := org.ParseRole(cmd.Role)
	if err != nil {
		return org.Invitation{}, err
	}
	orgID := cmd.OrganizationID
	if orgID == "" {
		orgID = rec.Session.ActiveOrganizationID()
	}
	if orgID == "" {
		return org.Invitation{}, auth.ErrNoActiveOrganization
	}
	if !wire.ValidID(wire.Organization, orgID) {
		return org.Invitation{}, org.ErrNotMember
	}
	var (
		inv  org.Invitation
		name string
	)
	err = h.orgs.Update(ctx, orgID, func(_ context.Context, o *org.Organization) error {
		var err error
		inv, err = o.Invite(rec.User.ID(), email, role, cmd.Resend, h.now())
		name = o.Profile().Name
		return err
	})
	if errors.Is(err, org.ErrNotFound) {
		return org.Invitation{}, org.ErrNotMember
	}
	if err != nil {
		return org.Invitation{}, err
	}
	if err := h.mailer.SendInvitation(ctx, inv.Email, name, h.link(inv.ID)); err != nil {
		h.log.ErrorContext(ctx, "invitation mail failed", "invitation_id", inv.ID, "err", err)
	}
	return inv, nil
}
