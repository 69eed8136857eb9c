package command

import (
	"context"
	"fmt"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
)

// SignOut ends the caller's session.
type SignOut struct{ Caller auth.Caller }

// SignOutHandler deletes the session; the very next request with its token fails. Signing
// out without a live session succeeds and does nothing, as in better-auth.
type SignOutHandler struct{ sessions port.Sessions }

// NewSignOutHandler returns the handler.
func NewSignOutHandler(sessions port.Sessions) SignOutHandler {
	if sessions == nil {
		panic("nil dependency")
	}
	return SignOutHandler{sessions: sessions}
}

// Handle signs out.
func (h SignOutHandler) Handle(ctx context.Context, cmd SignOut) error {
	if cmd.Caller.Record == nil {
		return nil
	}
	if err := h.sessions.Delete(ctx, cmd.Caller.Record.Session.ID()); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
