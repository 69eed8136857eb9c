package query

import (
	"context"
	"strings"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
)

// VerifyAPIKey checks a raw key.
type VerifyAPIKey struct{ Key string }

// VerifyAPIKeyHandler answers whether a key is valid, and what it is, without its secret.
// Verifying is a use: lastRequest moves.
type VerifyAPIKeyHandler struct {
	auth  *auth.Authenticator
	keys  port.Keys
	usage port.KeyUsage
}

// NewVerifyAPIKeyHandler returns the handler.
func NewVerifyAPIKeyHandler(a *auth.Authenticator, keys port.Keys, usage port.KeyUsage) VerifyAPIKeyHandler {
	if a == nil || keys == nil || usage == nil {
		panic("nil dependency")
	}
	return VerifyAPIKeyHandler{auth: a, keys: keys, usage: usage}
}

// Handle verifies; auth.ErrInvalidAPIKey for a missing, revoked or expired key.
func (h VerifyAPIKeyHandler) Handle(ctx context.Context, q VerifyAPIKey) (port.KeyRecord, error) {
	if strings.TrimSpace(q.Key) == "" {
		return port.KeyRecord{}, auth.Invalid("key", "is required")
	}
	now := h.auth.Now()
	rec, err := verifyKey(ctx, h.keys, strings.TrimSpace(q.Key), now)
	if err != nil {
		return port.KeyRecord{}, err
	}
	h.usage.Record(rec.Key.ID(), now)
	return rec, nil
}
