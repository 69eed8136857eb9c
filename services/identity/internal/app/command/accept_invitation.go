package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
)

// AcceptInvitation joins the caller to the organization that invited their address.
type AcceptInvitation struct {
	Caller       auth.Caller
	InvitationID string
}

// AcceptInvitationHandler adds the membership and, as better-auth does, makes the
// organization the session's active one.
type AcceptInvitationHandler struct {
	orgs     org.Repository
	sessions port.Sessions
	now      func() time.Time
}

// NewAcceptInvitationHandler returns the handler.
func NewAcceptInvitationHandler(orgs org.Repository, sessions port.Sessions, now func() time.Time) AcceptInvitationHandler {
	if orgs == nil || sessions == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return AcceptInvitationHandler{orgs: orgs, sessions: sessions, now: now}
}

// Handle accepts; org.ErrInvitationNotFound for an unknown, used or expired invitation.
func (h AcceptInvitationHandler) Handle(ctx context.Context, cmd AcceptInvitation) (org.Invitation, org.Membership, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return org.Invitation{}, org.Membership{}, err
	}
	if cmd.InvitationID == "" {
		return org.Invitation{}, org.Membership{}, auth.Invalid("invitationId", "is required")
	}
	if !wire.ValidID(wire.Invitation, cmd.InvitationID) {
		return org.Invitation{}, org.Membership{}, org.ErrInvitationNotFound
	}
	orgID, err := h.orgs.InvitationOrganization(ctx, cmd.InvitationID)
	if err != nil {
		return org.Invitation{}, org.Membership{}, err
	}
	now := h.now()
	var (
		inv org.Invitation
		m   org.Membership
	)
	err = h.orgs.Update(ctx, orgID, func(_ context.Context, o *org.Organization) error {
		var err error
		inv, m, err = o.Accept(cmd.InvitationID, person(rec.User), now)
		return err
	})
	if errors.Is(err, org.ErrNotFound) {
		return org.Invitation{}, org.Membership{}, org.ErrInvitationNotFound
	}
	if err != nil {
		return org.Invitation{}, org.Membership{}, err
	}
	err = h.sessions.Update(ctx, rec.Session.ID(), func(_ context.Context, s *session.Session) error {
		s.SetActiveOrganization(orgID, now)
		return nil
	})
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		return org.Invitation{}, org.Membership{}, fmt.Errorf("activate organization: %w", err)
	}
	return inv, m, nil
}
