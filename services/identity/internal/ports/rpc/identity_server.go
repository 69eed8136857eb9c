// Package rpc is identity's inbound internal API (identity.v1), served with Connect.
package rpc

import (
	"context"

	"connectrpc.com/connect"

	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
)

// IdentityServer answers the gateway's Resolve calls.
//
// Until accounts, sessions and API keys exist (the identity issue), no credential can be
// valid, so every request is rejected as unauthorized: the guard fails closed.
type IdentityServer struct {
	identityv1connect.UnimplementedIdentityServiceHandler
}

// NewIdentityServer returns the server.
func NewIdentityServer() *IdentityServer { return &IdentityServer{} }

// Resolve turns credentials into an identity or a rejection.
func (s *IdentityServer) Resolve(_ context.Context, _ *connect.Request[identityv1.ResolveRequest]) (*connect.Response[identityv1.ResolveResponse], error) {
	return connect.NewResponse(&identityv1.ResolveResponse{
		Result: &identityv1.ResolveResponse_Rejection{Rejection: &identityv1.Rejection{
			Code:    "unauthorized",
			Message: "no session or API key matches these credentials",
		}},
	}), nil
}
