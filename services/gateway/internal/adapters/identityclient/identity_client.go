// Package identityclient is the gateway's outbound adapter for identity.v1: it calls Resolve
// over Connect and converts the answer into the guard's Resolution.
package identityclient

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"svc.dev/libs/internalauth"
	"svc.dev/proto/errs"
	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/gateway/internal/app"
)

// ConnectIdentityClient implements app.Resolver against the identity service.
type ConnectIdentityClient struct {
	client identityv1connect.IdentityServiceClient
}

// New returns a client calling baseURL through httpClient (which signs, traces and breaks).
func New(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *ConnectIdentityClient {
	if httpClient == nil {
		panic("nil http client")
	}
	return &ConnectIdentityClient{client: identityv1connect.NewIdentityServiceClient(httpClient, baseURL, opts...)}
}

// Resolve asks identity who the credentials belong to.
func (c *ConnectIdentityClient) Resolve(ctx context.Context, cr app.Credentials) (app.Resolution, error) {
	resp, err := c.client.Resolve(ctx, connect.NewRequest(toResolveRequest(cr)))
	if err != nil {
		return app.Resolution{}, fmt.Errorf("resolve: %w", err)
	}
	return toResolution(resp.Msg), nil
}

func toResolveRequest(c app.Credentials) *identityv1.ResolveRequest {
	return &identityv1.ResolveRequest{Authorization: c.Authorization, Cookie: c.Cookie, ApiKey: c.APIKey, ClientIp: c.ClientIP}
}

// toResolution converts identity's answer, failing closed: an identity without an
// organization, with an auth mode the gateway does not know, or in api-key mode without a key
// id is refused as unauthorized, and so is an answer with neither member. A rejection code
// the gateway does not know is unauthorized too.
func toResolution(m *identityv1.ResolveResponse) app.Resolution {
	if id := m.GetIdentity(); id != nil && id.GetOrganizationId() != "" {
		out := internalauth.Identity{
			UserID:         id.GetUser().GetId(),
			Email:          id.GetUser().GetEmail(),
			OrganizationID: id.GetOrganizationId(),
		}
		var expires time.Time
		if ms := id.GetExpiresAtUnixMs(); ms != 0 {
			expires = time.UnixMilli(ms)
		}
		switch id.GetAuthMode() {
		case identityv1.AuthMode_AUTH_MODE_SESSION:
			if out.UserID != "" {
				out.AuthMode, out.Role = internalauth.ModeSession, id.GetRole()
				return app.Resolution{Identity: out, ExpiresAt: expires}
			}
		case identityv1.AuthMode_AUTH_MODE_API_KEY:
			if id.GetApiKeyId() != "" {
				out.AuthMode, out.APIKeyID = internalauth.ModeAPIKey, id.GetApiKeyId()
				return app.Resolution{Identity: out, ExpiresAt: expires}
			}
		}
		return app.Resolution{Rejection: errs.Unauthorized}
	}
	r := m.GetRejection()
	code := errs.Unauthorized
	if r != nil && r.GetCode() == string(errs.NoActiveOrganization) {
		code = errs.NoActiveOrganization
	}
	return app.Resolution{Rejection: code, Message: r.GetMessage()}
}
