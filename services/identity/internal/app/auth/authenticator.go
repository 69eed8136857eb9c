package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/credential"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
)

// Caller is who a request is: its session (nil without one) and whether it offered an API key.
type Caller struct {
	Record *port.SessionRecord
	// Token is the raw token the session was presented with, to sign into a cookie again.
	Token session.Token
	// Refreshed says the sliding expiry moved on this request, so the cookie should be set again.
	Refreshed bool
	// APIKeyPresented says the request carried an API key (valid or not).
	APIKeyPresented bool
}

// RequireSession returns the caller's session or ErrUnauthenticated.
func (c Caller) RequireSession() (*port.SessionRecord, error) {
	if c.Record == nil {
		return nil, ErrUnauthenticated
	}
	return c.Record, nil
}

// RequireKeyManager is RequireSession for the API key routes: a request that carries an API
// key is refused outright (a key cannot create, list or revoke keys), before its
// session is even looked at.
func (c Caller) RequireKeyManager() (*port.SessionRecord, error) {
	if c.APIKeyPresented {
		return nil, ErrKeyCannotManageKeys
	}
	return c.RequireSession()
}

// Authenticator turns credentials into a Caller.
type Authenticator struct {
	sessions port.Sessions
	orgs     org.Repository
	now      func() time.Time
	log      *slog.Logger
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(sessions port.Sessions, orgs org.Repository, now func() time.Time, log *slog.Logger) *Authenticator {
	if sessions == nil || orgs == nil || now == nil || log == nil {
		panic("auth: nil dependency")
	}
	return &Authenticator{sessions: sessions, orgs: orgs, now: now, log: log}
}

// Now is the authenticator's clock, shared with the use cases.
func (a *Authenticator) Now() time.Time { return a.now() }

// Authenticate finds the first session candidate that is live (bearer before cookie), extends
// it when the sliding threshold is crossed, and applies the default organization rule (a session without an
// active organization whose user has exactly one membership gets that one). No candidate
// alive is not an error: the Caller then has no session.
func (a *Authenticator) Authenticate(ctx context.Context, c credential.Credentials) (Caller, error) {
	caller := Caller{APIKeyPresented: c.APIKeyPresented}
	for _, tok := range c.Sessions {
		rec, err := a.sessions.Authenticate(ctx, tok.Hash())
		if errors.Is(err, session.ErrNotFound) {
			continue
		}
		if err != nil {
			return Caller{}, fmt.Errorf("authenticate: %w", err)
		}
		now := a.now()
		if rec.Session.Expired(now) {
			continue
		}
		if rec.Session.NeedsRefresh(now) {
			rec.Session.Refresh(now)
			if err := a.sessions.Extend(ctx, rec.Session.ID(), rec.Session.ExpiresAt()); err != nil {
				return Caller{}, fmt.Errorf("extend session: %w", err)
			}
			caller.Refreshed = true
		}
		if err := a.autoSelect(ctx, &rec, now); err != nil {
			return Caller{}, err
		}
		caller.Record, caller.Token = &rec, tok
		return caller, nil
	}
	return caller, nil
}

// autoSelect gives a session that never had an active organization chosen the user's only
// membership. A session whose user unset it on purpose keeps none.
func (a *Authenticator) autoSelect(ctx context.Context, rec *port.SessionRecord, now time.Time) error {
	s := rec.Session
	if s.ActiveOrganizationID() != "" || s.ActiveCleared() {
		return nil
	}
	m, ok, err := a.orgs.OnlyMembership(ctx, s.UserID())
	if err != nil {
		return fmt.Errorf("only membership: %w", err)
	}
	if !ok {
		return nil
	}
	err = a.sessions.Update(ctx, s.ID(), func(_ context.Context, stored *session.Session) error {
		if stored.ActiveOrganizationID() == "" && !stored.ActiveCleared() {
			stored.SetActiveOrganization(m.OrganizationID, now)
		}
		return nil
	})
	if errors.Is(err, session.ErrNotFound) {
		return nil // signed out meanwhile; this request still had a live session
	}
	if err != nil {
		return fmt.Errorf("select organization: %w", err)
	}
	s.SetActiveOrganization(m.OrganizationID, now)
	rec.Role = m.Role
	return nil
}

// ActiveOrganization returns the organization a session acts in and the user's role there:
// explicit (organizationID, from a request body or query) or the session's active one. It
// fails with ErrNoActiveOrganization when there is none, and org.ErrNotMember when the user
// does not belong to the one named.
func ActiveOrganization(ctx context.Context, orgs org.Repository, rec *port.SessionRecord, organizationID string) (*org.Organization, org.Membership, error) {
	id := organizationID
	if id == "" {
		id = rec.Session.ActiveOrganizationID()
	}
	if id == "" {
		return nil, org.Membership{}, ErrNoActiveOrganization
	}
	if !wire.ValidID(wire.Organization, id) {
		return nil, org.Membership{}, org.ErrNotMember
	}
	o, err := orgs.Get(ctx, id)
	if errors.Is(err, org.ErrNotFound) {
		// Unknown and foreign organizations answer alike: existence is not revealed.
		return nil, org.Membership{}, org.ErrNotMember
	}
	if err != nil {
		return nil, org.Membership{}, fmt.Errorf("get organization: %w", err)
	}
	m, err := o.Authorize(rec.User.ID())
	if err != nil {
		return nil, org.Membership{}, err
	}
	return o, m, nil
}
