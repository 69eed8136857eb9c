package query

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/credential"
)

// Mode is how a resolved request authenticated.
type Mode string

// The modes of a resolved identity.
const (
	ModeSession Mode = "session"
	ModeAPIKey  Mode = "api-key"
)

// The public codes of a rejection (docs/API.md, The error codes).
const (
	RejectUnauthorized         = "unauthorized"
	RejectNoActiveOrganization = "no_active_organization"
)

// Identity is who a guarded request is on behalf of, and in which organization.
type Identity struct {
	UserID         string
	Email          string
	OrganizationID string
	Mode           Mode
	APIKeyID       string
	// Role is the user's role in the organization for a session; empty for an API key.
	Role string
	// ExpiresAt is when the session or key expires; zero when it does not.
	ExpiresAt time.Time
}

// Resolution is exactly one of an identity or a rejection code with a message that is safe to
// show (it never says whether a key or session existed).
type Resolution struct {
	Identity  *Identity
	Rejection string
	Message   string
}

// Resolve asks who the credentials of a guarded request belong to.
type Resolve struct{ Credentials credential.Credentials }

// ResolveHandler applies the resolution order: a session first (bearer or cookie), and
// only when none resolves, an API key. A session without a usable active organization is
// rejected no_active_organization. Every answer comes from storage on this request — nothing
// is cached — so a revoked session or key fails on the very next request; a session costs one
// indexed lookup, a key one more. Key use is recorded in memory and written in batches.
type ResolveHandler struct {
	auth  *auth.Authenticator
	keys  port.Keys
	usage port.KeyUsage
}

// NewResolveHandler returns the handler.
func NewResolveHandler(a *auth.Authenticator, keys port.Keys, usage port.KeyUsage) ResolveHandler {
	if a == nil || keys == nil || usage == nil {
		panic("nil dependency")
	}
	return ResolveHandler{auth: a, keys: keys, usage: usage}
}

// Handle resolves. An error means storage failed, never that the credentials are bad.
func (h ResolveHandler) Handle(ctx context.Context, q Resolve) (Resolution, error) {
	caller, err := h.auth.Authenticate(ctx, q.Credentials)
	if err != nil {
		return Resolution{}, err
	}
	if rec := caller.Record; rec != nil {
		if rec.Role == "" || rec.Session.ActiveOrganizationID() == "" {
			return Resolution{Rejection: RejectNoActiveOrganization,
				Message: "the session has no active organization; call POST /api/auth/organization/set-active"}, nil
		}
		return Resolution{Identity: &Identity{UserID: rec.User.ID(), Email: rec.User.Email(),
			OrganizationID: rec.Session.ActiveOrganizationID(), Mode: ModeSession, Role: string(rec.Role),
			ExpiresAt: rec.Session.ExpiresAt()}}, nil
	}
	now := h.auth.Now()
	for _, raw := range q.Credentials.APIKeys {
		rec, err := verifyKey(ctx, h.keys, raw, now)
		if errors.Is(err, auth.ErrInvalidAPIKey) {
			continue
		}
		if err != nil {
			return Resolution{}, err
		}
		h.usage.Record(rec.Key.ID(), now)
		return Resolution{Identity: &Identity{UserID: rec.Creator.ID, Email: rec.Creator.Email,
			OrganizationID: rec.Key.OrganizationID(), Mode: ModeAPIKey, APIKeyID: rec.Key.ID(),
			ExpiresAt: rec.Key.ExpiresAt()}}, nil
	}
	return Resolution{Rejection: RejectUnauthorized, Message: "no session or API key matches these credentials"}, nil
}

// verifyKey finds a usable key for raw, or auth.ErrInvalidAPIKey.
func verifyKey(ctx context.Context, keys port.Keys, raw string, now time.Time) (port.KeyRecord, error) {
	if !apikey.WellFormed(raw) {
		return port.KeyRecord{}, auth.ErrInvalidAPIKey
	}
	rec, err := keys.Authenticate(ctx, apikey.Hash(raw))
	if errors.Is(err, apikey.ErrNotFound) {
		return port.KeyRecord{}, auth.ErrInvalidAPIKey
	}
	if err != nil {
		return port.KeyRecord{}, fmt.Errorf("find key: %w", err)
	}
	if !rec.Key.Usable(now) {
		return port.KeyRecord{}, auth.ErrInvalidAPIKey
	}
	return rec, nil
}
