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
	IPAddress    string
}

// AcceptInvitationHandler adds the membership and, as better-auth does, makes the
// organization the session's active one. An invitation id is a bearer secret that only the
// invitee's address is meant to learn, and addresses are never verified: whoever signs up
// with an invitee's address first could try ids. So attempts are limited per user and per
// client address, each on its own budget.
type AcceptInvitationHandler struct {
	orgs     org.Repository
	sessions port.Sessions
	limiter  port.AttemptLimiter
	now      func() time.Time
}

// NewAcceptInvitationHandler returns the handler.
func NewAcceptInvitationHandler(orgs org.Repository, sessions port.Sessions, limiter port.AttemptLimiter, now func() time.Time) AcceptInvitationHandler {
	if orgs == nil || sessions == nil || limiter == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return AcceptInvitationHandler{orgs: orgs, sessions: sessions, limiter: limiter, now: now}
}

// AcceptInvitationUserKey and AcceptInvitationIPKey are the limiter keys of accept-invitation
// attempts by a user and from a client address.
func AcceptInvitationUserKey(userID string) string { return "accept-invitation:user:" + userID }

// AcceptInvitationIPKey: see AcceptInvitationUserKey.
func AcceptInvitationIPKey(ip string) string { return "accept-invitation:ip:" + ip }

// Handle accepts; org.ErrInvitationNotFound for an unknown, used or expired invitation,
// *auth.RateLimitedError past the user's or the address's attempts,
// org.ErrTooManyOrganizations past the user's ceiling of organizations.
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
	// The user's bucket first: a user past their limit spends none of their address's.
	for _, key := range []string{AcceptInvitationUserKey(rec.User.ID()), AcceptInvitationIPKey(cmd.IPAddress)} {
		if ok, retry := h.limiter.Allow(ctx, key); !ok {
			return org.Invitation{}, org.Membership{}, &auth.RateLimitedError{RetryAfter: retry}
		}
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
