// Package rpc is identity's inbound internal API (identity.v1), served with Connect.
package rpc

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/identity/internal/app/query"
	"svc.dev/services/identity/internal/domain/credential"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
)

// IdentityServer answers the gateway's Resolve calls and webhook-ingress's LookupOrganization
// calls.
type IdentityServer struct {
	identityv1connect.UnimplementedIdentityServiceHandler
	resolve query.ResolveHandler
	lookup  query.LookupOrganizationHandler
	signer  session.Signer
	log     *slog.Logger
}

// NewIdentityServer returns the server.
func NewIdentityServer(resolve query.ResolveHandler, lookup query.LookupOrganizationHandler, signer session.Signer, log *slog.Logger) *IdentityServer {
	if log == nil {
		panic("nil logger")
	}
	return &IdentityServer{resolve: resolve, lookup: lookup, signer: signer, log: log}
}

// Resolve turns the raw credentials the gateway saw into an identity or a rejection. Bad
// credentials are a rejection (a normal answer); only a failure of identity itself (its
// database) is a Connect error, on which the gateway fails closed.
func (s *IdentityServer) Resolve(ctx context.Context, req *connect.Request[identityv1.ResolveRequest]) (*connect.Response[identityv1.ResolveResponse], error) {
	m := req.Msg
	creds := credential.Parse(m.GetAuthorization(), m.GetCookie(), m.GetApiKey(), s.signer)
	res, err := s.resolve.Handle(ctx, query.Resolve{Credentials: creds})
	if err != nil {
		// The cause stays in this log; the gateway only needs to know it must fail closed.
		s.log.ErrorContext(ctx, "resolve failed", "err", err)
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("identity cannot resolve credentials right now"))
	}
	return connect.NewResponse(toResolveResponse(res)), nil
}

// LookupOrganization finds the organization with a slug. An unknown slug is a not_found answer;
// only a failure of identity itself (its database) is a Connect error, unavailable, so that the
// caller never takes an outage for an organization that does not exist.
func (s *IdentityServer) LookupOrganization(ctx context.Context, req *connect.Request[identityv1.LookupOrganizationRequest]) (*connect.Response[identityv1.LookupOrganizationResponse], error) {
	ref, err := s.lookup.Handle(ctx, query.LookupOrganization{Slug: req.Msg.GetSlug()})
	if errors.Is(err, org.ErrNotFound) {
		return connect.NewResponse(&identityv1.LookupOrganizationResponse{
			Result: &identityv1.LookupOrganizationResponse_NotFound{NotFound: &identityv1.NotFound{}}}), nil
	}
	if err != nil {
		s.log.ErrorContext(ctx, "organization lookup failed", "err", err)
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("identity cannot look organizations up right now"))
	}
	return connect.NewResponse(&identityv1.LookupOrganizationResponse{Result: &identityv1.LookupOrganizationResponse_Organization{
		Organization: &identityv1.Organization{Id: ref.ID, Slug: ref.Slug}}}), nil
}

// toResolveResponse converts the app's resolution into the wire message.
func toResolveResponse(r query.Resolution) *identityv1.ResolveResponse {
	if id := r.Identity; id != nil {
		out := &identityv1.Identity{
			User:           &identityv1.User{Id: id.UserID, Email: id.Email},
			OrganizationId: id.OrganizationID,
			AuthMode:       identityv1.AuthMode_AUTH_MODE_SESSION,
			Role:           id.Role,
		}
		if !id.ExpiresAt.IsZero() {
			out.ExpiresAtUnixMs = id.ExpiresAt.UnixMilli()
		}
		if id.Mode == query.ModeAPIKey {
			out.AuthMode, out.ApiKeyId = identityv1.AuthMode_AUTH_MODE_API_KEY, id.APIKeyID
		}
		return &identityv1.ResolveResponse{Result: &identityv1.ResolveResponse_Identity{Identity: out}}
	}
	return &identityv1.ResolveResponse{Result: &identityv1.ResolveResponse_Rejection{Rejection: &identityv1.Rejection{
		Code: r.Rejection, Message: r.Message,
	}}}
}
