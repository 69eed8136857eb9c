package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/secret"
	"svc.dev/services/identity/internal/domain/user"
)

// ResetPassword sets a new password with a reset token.
type ResetPassword struct {
	Token       string
	NewPassword string
}

// ResetPasswordHandler consumes the token (once), stores the new password and revokes every
// session of the user in the same transaction as the password: all devices are signed out.
type ResetPasswordHandler struct {
	users  user.Repository
	tokens port.ResetTokens
	hasher port.PasswordHasher
	now    func() time.Time
}

// NewResetPasswordHandler returns the handler.
func NewResetPasswordHandler(users user.Repository, tokens port.ResetTokens, hasher port.PasswordHasher, now func() time.Time) ResetPasswordHandler {
	if users == nil || tokens == nil || hasher == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return ResetPasswordHandler{users: users, tokens: tokens, hasher: hasher, now: now}
}

// Handle resets the password; auth.ErrInvalidResetToken for an unknown, used or expired token.
func (h ResetPasswordHandler) Handle(ctx context.Context, cmd ResetPassword) error {
	// The password is checked first so that a too-short one does not use the token up.
	if err := user.CheckPassword(cmd.NewPassword); err != nil {
		return err
	}
	if cmd.Token == "" || len(cmd.Token) > 256 {
		return auth.ErrInvalidResetToken
	}
	hash, err := h.hasher.Hash(cmd.NewPassword)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	now := h.now()
	userID, err := h.tokens.Consume(ctx, secret.SHA256URL(cmd.Token), now)
	if errors.Is(err, port.ErrResetTokenNotFound) {
		return auth.ErrInvalidResetToken
	}
	if err != nil {
		return fmt.Errorf("consume reset token: %w", err)
	}
	err = h.users.Update(ctx, userID, func(_ context.Context, u *user.User) error {
		u.ChangePassword(hash, true, now)
		return nil
	})
	if errors.Is(err, user.ErrNotFound) {
		return auth.ErrInvalidResetToken
	}
	return err
}
