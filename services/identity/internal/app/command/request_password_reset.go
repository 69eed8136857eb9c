package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/secret"
	"svc.dev/services/identity/internal/domain/user"
)

// ResetTokenTTL is how long a reset link works (better-auth's default).
const ResetTokenTTL = time.Hour

// RequestPasswordReset asks for a reset link to be mailed to Email.
type RequestPasswordReset struct {
	Email string
	// RedirectTo is where the link leads (a path or a trusted URL, checked by the caller);
	// empty for the default page.
	RedirectTo string
	IPAddress  string
}

// RequestPasswordResetHandler mails a one-time reset link when the address belongs to a
// user, and answers the same either way, so that the route does not reveal who has an
// account. The token is stored hashed; the raw token exists only in the link. Requests share
// the client address's password-reset limit with reset-password, so that nobody can flood an
// inbox (or the mail adapter) from one address.
type RequestPasswordResetHandler struct {
	users   user.Repository
	tokens  port.ResetTokens
	mailer  port.Mailer
	limiter port.AttemptLimiter
	link    func(token, redirectTo string) string
	now     func() time.Time
	log     *slog.Logger
}

// NewRequestPasswordResetHandler returns the handler; link builds the URL mailed for a token.
func NewRequestPasswordResetHandler(users user.Repository, tokens port.ResetTokens, mailer port.Mailer, limiter port.AttemptLimiter,
	link func(token, redirectTo string) string, now func() time.Time, log *slog.Logger,
) RequestPasswordResetHandler {
	if users == nil || tokens == nil || mailer == nil || limiter == nil || link == nil || log == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return RequestPasswordResetHandler{users: users, tokens: tokens, mailer: mailer, limiter: limiter, link: link, now: now, log: log}
}

// Handle requests the reset. Only a malformed address, the attempt limit
// (*auth.RateLimitedError) or a storage failure is an error.
func (h RequestPasswordResetHandler) Handle(ctx context.Context, cmd RequestPasswordReset) error {
	email, err := user.NormalizeEmail(cmd.Email)
	if err != nil {
		return err
	}
	if ok, retry := h.limiter.Allow(ctx, PasswordResetKey(cmd.IPAddress)); !ok {
		return &auth.RateLimitedError{RetryAfter: retry}
	}
	u, err := h.users.ByEmail(ctx, email)
	if errors.Is(err, user.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find user: %w", err)
	}
	token := secret.Random(32, secret.Alphanumeric)
	if err := h.tokens.Add(ctx, u.ID(), secret.SHA256URL(token), h.now().Add(ResetTokenTTL)); err != nil {
		return fmt.Errorf("store reset token: %w", err)
	}
	if err := h.mailer.SendPasswordReset(ctx, u.Email(), h.link(token, cmd.RedirectTo)); err != nil {
		// The answer must not differ from an unknown address's, so the failure is only logged.
		h.log.ErrorContext(ctx, "password reset mail failed", "user_id", u.ID(), "err", err)
	}
	return nil
}
