package httpapi

import (
	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// The response bodies of /api/auth/*, shaped as better-auth's (objects). Every
// timestamp is wire.Time: exactly three fractional digits, which better-auth's client parses.

type userResponse struct {
	ID            string    `json:"id"`
	Email         string    `json:"email"`
	Name          string    `json:"name"`
	EmailVerified bool      `json:"emailVerified"`
	Image         *string   `json:"image"`
	CreatedAt     wire.Time `json:"createdAt"`
	UpdatedAt     wire.Time `json:"updatedAt"`
}

func toUserResponse(u *user.User) userResponse {
	return userResponse{ID: u.ID(), Email: u.Email(), Name: u.Name(), EmailVerified: u.EmailVerified(),
		CreatedAt: wire.NewTime(u.CreatedAt()), UpdatedAt: wire.NewTime(u.UpdatedAt())}
}

type sessionResponse struct {
	ID                   string    `json:"id"`
	UserID               string    `json:"userId"`
	Token                string    `json:"token,omitempty"`
	ExpiresAt            wire.Time `json:"expiresAt"`
	ActiveOrganizationID *string   `json:"activeOrganizationId"`
	IPAddress            string    `json:"ipAddress"`
	UserAgent            string    `json:"userAgent"`
	CreatedAt            wire.Time `json:"createdAt"`
	UpdatedAt            wire.Time `json:"updatedAt"`
}

// toSessionResponse converts s; tok is the raw token the client presented (get-session
// shows it, as better-auth does), or "".
func toSessionResponse(s *session.Session, tok session.Token) sessionResponse {
	out := sessionResponse{ID: s.ID(), UserID: s.UserID(), Token: string(tok), ExpiresAt: wire.NewTime(s.ExpiresAt()),
		IPAddress: s.IPAddress(), UserAgent: s.UserAgent(), CreatedAt: wire.NewTime(s.CreatedAt()), UpdatedAt: wire.NewTime(s.UpdatedAt())}
	if id := s.ActiveOrganizationID(); id != "" {
		out.ActiveOrganizationID = &id
	}
	return out
}

type getSessionResponse struct {
	Session sessionResponse `json:"session"`
	User    userResponse    `json:"user"`
}

// tokenResponse is sign-up's body; sign-in adds redirect.
type tokenResponse struct {
	Redirect *bool        `json:"redirect,omitempty"`
	Token    *string      `json:"token"`
	User     userResponse `json:"user"`
}

type organizationResponse struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Slug      string    `json:"slug"`
	CreatedAt wire.Time `json:"createdAt"`
}

func toOrganizationResponse(p org.Profile) organizationResponse {
	return organizationResponse{ID: p.ID, Name: p.Name, Slug: p.Slug, CreatedAt: wire.NewTime(p.CreatedAt)}
}

func toOrganizationsResponse(ps []org.Profile) []organizationResponse {
	out := make([]organizationResponse, 0, len(ps))
	for _, p := range ps {
		out = append(out, toOrganizationResponse(p))
	}
	return out
}

type memberUserResponse struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

type memberResponse struct {
	ID             string              `json:"id"`
	OrganizationID string              `json:"organizationId"`
	UserID         string              `json:"userId"`
	Role           string              `json:"role"`
	CreatedAt      wire.Time           `json:"createdAt"`
	User           *memberUserResponse `json:"user,omitempty"`
}

func toMemberResponse(m org.Membership, withUser bool) memberResponse {
	out := memberResponse{ID: m.ID, OrganizationID: m.OrganizationID, UserID: m.User.ID, Role: string(m.Role), CreatedAt: wire.NewTime(m.CreatedAt)}
	if withUser {
		out.User = &memberUserResponse{ID: m.User.ID, Name: m.User.Name, Email: m.User.Email}
	}
	return out
}

type createdOrganizationResponse struct {
	organizationResponse
	Members []memberResponse `json:"members"`
}

func toCreatedOrganizationResponse(o *org.Organization) createdOrganizationResponse {
	out := createdOrganizationResponse{organizationResponse: toOrganizationResponse(o.Profile()), Members: []memberResponse{}}
	for _, m := range o.Members() {
		out.Members = append(out.Members, toMemberResponse(m, false))
	}
	return out
}

type membersResponse struct {
	Members []memberResponse `json:"members"`
	Total   int              `json:"total"`
}

func toMembersResponse(ms []org.Membership) membersResponse {
	out := membersResponse{Members: make([]memberResponse, 0, len(ms)), Total: len(ms)}
	for _, m := range ms {
		out.Members = append(out.Members, toMemberResponse(m, true))
	}
	return out
}

type invitationResponse struct {
	ID             string    `json:"id"`
	OrganizationID string    `json:"organizationId"`
	Email          string    `json:"email"`
	Role           string    `json:"role"`
	Status         string    `json:"status"`
	InviterID      string    `json:"inviterId"`
	ExpiresAt      wire.Time `json:"expiresAt"`
	CreatedAt      wire.Time `json:"createdAt"`
}

func toInvitationResponse(i org.Invitation) invitationResponse {
	return invitationResponse{ID: i.ID, OrganizationID: i.OrganizationID, Email: i.Email, Role: string(i.Role), Status: string(i.Status),
		InviterID: i.InviterID, ExpiresAt: wire.NewTime(i.ExpiresAt), CreatedAt: wire.NewTime(i.CreatedAt)}
}

// apiKeyResponse is a key as better-auth's api-key plugin shows it. The raw key is present
// only in the answer to create; the rate-limit and refill members better-auth has are
// constant here (the gateway limits per principal instead).
type apiKeyResponse struct {
	ID               string    `json:"id"`
	ConfigID         string    `json:"configId"`
	Name             *string   `json:"name"`
	Start            string    `json:"start"`
	Prefix           string    `json:"prefix"`
	Key              string    `json:"key,omitempty"`
	ReferenceID      string    `json:"referenceId"`
	Enabled          bool      `json:"enabled"`
	ExpiresAt        wire.Time `json:"expiresAt"`
	LastRequest      wire.Time `json:"lastRequest"`
	CreatedAt        wire.Time `json:"createdAt"`
	UpdatedAt        wire.Time `json:"updatedAt"`
	RateLimitEnabled bool      `json:"rateLimitEnabled"`
	Remaining        *int      `json:"remaining"`
	Metadata         any       `json:"metadata"`
	Permissions      any       `json:"permissions"`
}

func toAPIKeyResponse(k *apikey.APIKey, raw string) apiKeyResponse {
	out := apiKeyResponse{ID: k.ID(), ConfigID: "default", Start: k.Start(), Prefix: apikey.Prefix, Key: raw, ReferenceID: k.OrganizationID(),
		Enabled: k.Enabled(), ExpiresAt: wire.NewTime(k.ExpiresAt()), LastRequest: wire.NewTime(k.LastRequest()),
		CreatedAt: wire.NewTime(k.CreatedAt()), UpdatedAt: wire.NewTime(k.UpdatedAt())}
	if n := k.Name(); n != "" {
		out.Name = &n
	}
	return out
}

type apiKeysResponse struct {
	APIKeys []apiKeyResponse `json:"apiKeys"`
	Total   int              `json:"total"`
}

func toAPIKeysResponse(ks []*apikey.APIKey) apiKeysResponse {
	out := apiKeysResponse{APIKeys: make([]apiKeyResponse, 0, len(ks)), Total: len(ks)}
	for _, k := range ks {
		out.APIKeys = append(out.APIKeys, toAPIKeyResponse(k, ""))
	}
	return out
}

type verifyResponse struct {
	Valid bool           `json:"valid"`
	Error any            `json:"error"`
	Key   apiKeyResponse `json:"key"`
}

func toVerifyResponse(rec port.KeyRecord) verifyResponse {
	return verifyResponse{Valid: true, Key: toAPIKeyResponse(rec.Key, "")}
}

type successResponse struct {
	Success bool `json:"success"`
}

type statusResponse struct {
	Status  bool   `json:"status"`
	Message string `json:"message,omitempty"`
}

type bootstrapKeyResponse struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Start string `json:"start"`
}

type bootstrapResponse struct {
	User         userResponse         `json:"user"`
	Organization organizationResponse `json:"organization"`
	Token        string               `json:"token"`
	APIKey       bootstrapKeyResponse `json:"apiKey"`
}
