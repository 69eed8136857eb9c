package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// User is the auth layer's user.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Session is a signed-in session: the cookie that carries it and its user.
type Session struct {
	// Token is the raw session token.
	Token string
	// Cookie is the session cookie as a "name=value" pair, ready for a Cookie header.
	Cookie string
	User   User
}

// SessionInfo is get-session's answer.
type SessionInfo struct {
	Session struct {
		ID                   string  `json:"id"`
		UserID               string  `json:"userId"`
		ActiveOrganizationID *string `json:"activeOrganizationId"`
	} `json:"session"`
	User User `json:"user"`
}

// Organization is an organization the user belongs to.
type Organization struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
}

// APIKey is a key as listings show it: never the raw value.
type APIKey struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Start       string  `json:"start"`
	CreatedAt   string  `json:"createdAt"`
	LastRequest *string `json:"lastRequest"`
}

// NewAPIKey is a key just minted, with its raw value (shown only once).
type NewAPIKey struct {
	APIKey
	Key         string `json:"key"`
	ReferenceID string `json:"referenceId"`
}

type credentialsBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name,omitempty"`
}

// SignIn signs in with email and password (POST /api/auth/sign-in/email). An unknown email
// is an *Error with code USER_NOT_FOUND.
func (c *Client) SignIn(ctx context.Context, email, password string) (*Session, error) {
	return c.session(ctx, "/api/auth/sign-in/email", credentialsBody{Email: email, Password: password})
}

// SignUp creates the user, its personal organization and a session (POST
// /api/auth/sign-up/email).
func (c *Client) SignUp(ctx context.Context, email, password, name string) (*Session, error) {
	return c.session(ctx, "/api/auth/sign-up/email", credentialsBody{Email: email, Password: password, Name: name})
}

func (c *Client) session(ctx context.Context, path string, body credentialsBody) (*Session, error) {
	resp, err := c.do(ctx, request{method: http.MethodPost, path: path, body: body})
	if err != nil {
		return nil, err
	}
	var out struct {
		Token string `json:"token"`
		User  User   `json:"user"`
	}
	if err := decodeInto(resp, &out); err != nil {
		return nil, err
	}
	s := &Session{Token: out.Token, User: out.User}
	for _, ck := range (&http.Response{Header: resp.header}).Cookies() {
		if ck.Name == SessionCookieName && ck.Value != "" {
			s.Cookie = ck.Name + "=" + ck.Value
		}
	}
	if s.Cookie == "" {
		// The bearer plugin's header carries the same signed value as the cookie.
		if signed := resp.header.Get("Set-Auth-Token"); signed != "" {
			s.Cookie = SessionCookieName + "=" + url.QueryEscape(signed)
		}
	}
	if s.Cookie == "" || s.User.ID == "" {
		return nil, fmt.Errorf("%s: the answer holds no session cookie or user", path)
	}
	return s, nil
}

// GetSession reads the session the cookie carries; nil when it is not valid.
func (c *Client) GetSession(ctx context.Context, cookie string) (*SessionInfo, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/api/auth/get-session", auth: Auth{Cookie: cookie}})
	if err != nil {
		return nil, err
	}
	var out *SessionInfo
	if err := decodeInto(resp, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListOrganizations lists the session user's organizations.
func (c *Client) ListOrganizations(ctx context.Context, cookie string) ([]Organization, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/api/auth/organization/list", auth: Auth{Cookie: cookie}})
	if err != nil {
		return nil, err
	}
	var out []Organization
	return out, decodeInto(resp, &out)
}

// CreateOrganization creates an organization owned by the session user; it becomes active.
func (c *Client) CreateOrganization(ctx context.Context, cookie, name, slug string) (*Organization, error) {
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/api/auth/organization/create", auth: Auth{Cookie: cookie},
		body: map[string]string{"name": name, "slug": slug}})
	if err != nil {
		return nil, err
	}
	var out Organization
	return &out, decodeInto(resp, &out)
}

// SetActiveOrganization makes the organization active for the session.
func (c *Client) SetActiveOrganization(ctx context.Context, cookie, organizationID string) error {
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/auth/organization/set-active", auth: Auth{Cookie: cookie},
		body: map[string]string{"organizationId": organizationID}})
	return err
}

// CreateAPIKey mints a key for the session's active organization.
func (c *Client) CreateAPIKey(ctx context.Context, cookie, name string) (*NewAPIKey, json.RawMessage, error) {
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/api/auth/api-key/create", auth: Auth{Cookie: cookie},
		body: map[string]string{"name": name}})
	if err != nil {
		return nil, nil, err
	}
	var out NewAPIKey
	if err := decodeInto(resp, &out); err != nil {
		return nil, nil, err
	}
	if out.Key == "" || out.ID == "" {
		return nil, nil, fmt.Errorf("api-key/create: the answer holds no key")
	}
	return &out, resp.body, nil
}

// ListAPIKeys lists the keys of the session's active organization.
func (c *Client) ListAPIKeys(ctx context.Context, cookie string) ([]APIKey, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/api/auth/api-key/list", auth: Auth{Cookie: cookie}})
	if err != nil {
		return nil, err
	}
	var out struct {
		APIKeys []APIKey `json:"apiKeys"`
	}
	if err := decodeInto(resp, &out); err != nil {
		return nil, err
	}
	if out.APIKeys == nil {
		out.APIKeys = []APIKey{}
	}
	return out.APIKeys, nil
}

// RevokeAPIKey revokes a key (DELETE /api/auth/api-key/:id).
func (c *Client) RevokeAPIKey(ctx context.Context, cookie, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/auth/api-key/" + url.PathEscape(id), auth: Auth{Cookie: cookie}})
	return err
}
