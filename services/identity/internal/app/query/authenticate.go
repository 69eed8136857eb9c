package query

import (
	"context"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/domain/credential"
)

// Authenticate finds the caller of an auth-layer request.
type Authenticate struct{ Credentials credential.Credentials }

// AuthenticateHandler resolves the session (with its sliding refresh) of a request.
type AuthenticateHandler struct{ auth *auth.Authenticator }

// NewAuthenticateHandler returns the handler.
func NewAuthenticateHandler(a *auth.Authenticator) AuthenticateHandler {
	if a == nil {
		panic("nil dependency")
	}
	return AuthenticateHandler{auth: a}
}

// Handle returns the caller; without a live session its Record is nil.
func (h AuthenticateHandler) Handle(ctx context.Context, q Authenticate) (auth.Caller, error) {
	return h.auth.Authenticate(ctx, q.Credentials)
}
