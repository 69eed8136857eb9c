package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
)

// CreateOrganization creates an organization owned by the caller.
type CreateOrganization struct {
	Caller auth.Caller
	Name   string
	Slug   string
	// KeepCurrentActive leaves the session's active organization as it is.
	KeepCurrentActive bool
}

// CreateOrganizationHandler creates the organization with the caller as its owner and makes
// it the session's active organization.
type CreateOrganizationHandler struct {
	orgs     org.Repository
	sessions port.Sessions
	now      func() time.Time
}

// NewCreateOrganizationHandler returns the handler.
func NewCreateOrganizationHandler(orgs org.Repository, sessions port.Sessions, now func() time.Time) CreateOrganizationHandler {
	if orgs == nil || sessions == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return CreateOrganizationHandler{orgs: orgs, sessions: sessions, now: now}
}

// Handle creates the organization; org.ErrSlugTaken when the slug is in use.
func (h CreateOrganizationHandler) Handle(ctx context.Context, cmd CreateOrganization) (*org.Organization, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return nil, err
	}
	now := h.now()
	o, err := org.New(cmd.Name, cmd.Slug, person(rec.User), now)
	if err != nil {
		return nil, err
	}
	if err := h.orgs.Add(ctx, o); err != nil {
		return nil, err
	}
	if !cmd.KeepCurrentActive {
		err := h.sessions.Update(ctx, rec.Session.ID(), func(_ context.Context, s *session.Session) error {
			s.SetActiveOrganization(o.ID(), now)
			return nil
		})
		if errors.Is(err, session.ErrNotFound) {
			return nil, auth.ErrUnauthenticated // signed out meanwhile, as set-active answers
		}
		if err != nil {
			return nil, fmt.Errorf("activate organization: %w", err)
		}
	}
	return o, nil
}
