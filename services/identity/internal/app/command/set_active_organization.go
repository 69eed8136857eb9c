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

// SetActiveOrganization selects (or, with Clear, unsets) the session's active organization,
// named by id or by slug. With none of the three it reports the current one.
type SetActiveOrganization struct {
	Caller         auth.Caller
	OrganizationID string
	Slug           string
	Clear          bool
}

// SetActiveOrganizationHandler is how a client recovers from no_active_organization.
type SetActiveOrganizationHandler struct {
	orgs     org.Repository
	sessions port.Sessions
	now      func() time.Time
}

// NewSetActiveOrganizationHandler returns the handler.
func NewSetActiveOrganizationHandler(orgs org.Repository, sessions port.Sessions, now func() time.Time) SetActiveOrganizationHandler {
	if orgs == nil || sessions == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return SetActiveOrganizationHandler{orgs: orgs, sessions: sessions, now: now}
}

// Handle returns the now active organization, or nil when none is. An organization the
// user does not belong to — or that does not exist — is org.ErrNotMember.
func (h SetActiveOrganizationHandler) Handle(ctx context.Context, cmd SetActiveOrganization) (*org.Profile, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return nil, err
	}
	now := h.now()
	if cmd.Clear {
		return nil, h.save(ctx, rec.Session.ID(), func(s *session.Session) { s.ClearActiveOrganization(now) })
	}
	var o *org.Organization
	switch {
	case cmd.OrganizationID != "":
		if !wire.ValidID(wire.Organization, cmd.OrganizationID) {
			return nil, org.ErrNotMember
		}
		o, err = h.orgs.Get(ctx, cmd.OrganizationID)
	case cmd.Slug != "":
		if !org.ValidSlug(cmd.Slug) {
			return nil, org.ErrNotMember
		}
		o, err = h.orgs.BySlug(ctx, cmd.Slug)
	default:
		o, _, err = auth.ActiveOrganization(ctx, h.orgs, rec, "")
		if errors.Is(err, auth.ErrNoActiveOrganization) || errors.Is(err, org.ErrNotMember) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		p := o.Profile()
		return &p, nil
	}
	if errors.Is(err, org.ErrNotFound) {
		return nil, org.ErrNotMember
	}
	if err != nil {
		return nil, fmt.Errorf("get organization: %w", err)
	}
	if _, err := o.Authorize(rec.User.ID()); err != nil {
		return nil, err
	}
	if err := h.save(ctx, rec.Session.ID(), func(s *session.Session) { s.SetActiveOrganization(o.ID(), now) }); err != nil {
		return nil, err
	}
	p := o.Profile()
	return &p, nil
}

func (h SetActiveOrganizationHandler) save(ctx context.Context, id string, change func(*session.Session)) error {
	err := h.sessions.Update(ctx, id, func(_ context.Context, s *session.Session) error {
		change(s)
		return nil
	})
	if errors.Is(err, session.ErrNotFound) {
		return auth.ErrUnauthenticated
	}
	if err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	return nil
}
