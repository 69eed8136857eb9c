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
	IPAddress   string
}

// ResetPasswordHandler uses the token up, stores the new password, revokes every session of
// the user (all devices are signed out) and deletes the user's other reset tokens, all in one
// transaction. The cheap checks come first — the password's length, the shape of the token,
// the client address's attempt limit, the token's existence — so that a bogus request never
// costs an argon2id hash.
type ResetPasswordHandler struct {
	tokens  port.ResetTokens
	hasher  port.PasswordHasher
	limiter port.AttemptLimiter
	now     func() time.Time
}

// NewResetPasswordHandler returns the handler.
func NewResetPasswordHandler(tokens port.ResetTokens, hasher port.PasswordHasher, limiter port.AttemptLimiter, now func() time.Time) ResetPasswordHandler {
	if tokens == nil || hasher == nil || limiter == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return ResetPasswordHandler{tokens: tokens, hasher: hasher, limiter: limiter, now: now}
}

// PasswordResetKey is the limiter key of the password-reset calls (asking for a link and
// using one) from ip.
func PasswordResetKey(ip string) string { return "password-reset:" + ip }

// Handle resets the password; auth.ErrInvalidResetToken for an unknown, used or expired
// token, *auth.RateLimitedError past the address's limit.
func (h ResetPasswordHandler) Handle(ctx context.Context, cmd ResetPassword) error {
	// The password is checked first so that a too-short one does not use the token up.
	if err := user.CheckPassword(cmd.NewPassword); err != nil {
		return err
	}
	if cmd.Token == "" || len(cmd.Token) > 256 {
		return auth.ErrInvalidResetToken
	}
	if ok, retry := h.limiter.Allow(ctx, PasswordResetKey(cmd.IPAddress)); !ok {
		return &auth.RateLimitedError{RetryAfter: retry}
	}
	tokenHash, now := secret.SHA256URL(cmd.Token), h.now()
	if _, err := h.tokens.Lookup(ctx, tokenHash, now); err != nil {
		if errors.Is(err, port.ErrResetTokenNotFound) {
			return auth.ErrInvalidResetToken
		}
		return fmt.Errorf("look up reset token: %w", err)
	}
	hash, err := h.hasher.Hash(ctx, cmd.NewPassword)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	err = h.tokens.Redeem(ctx, tokenHash, now, func(_ context.Context, u *user.User) error {
		u.ChangePassword(hash, true, now)
		return nil
	})
	if errors.Is(err, port.ErrResetTokenNotFound) || errors.Is(err, user.ErrNotFound) {
		return auth.ErrInvalidResetToken // used meanwhile, or its user is gone
	}
	if err != nil {
		return fmt.Errorf("redeem reset token: %w", err)
	}
	return nil
}
