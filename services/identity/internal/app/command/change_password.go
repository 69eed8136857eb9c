package command

import (
	"context"
	"fmt"
	"time"

	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// ChangePassword replaces the caller's password.
type ChangePassword struct {
	Caller              auth.Caller
	CurrentPassword     string
	NewPassword         string
	RevokeOtherSessions bool
	IPAddress           string
	UserAgent           string
}

// ChangePasswordResult is the updated user and, when other sessions were revoked, the fresh
// session that replaces the caller's (Session nil otherwise).
type ChangePasswordResult struct {
	User    *user.User
	Session *session.Session
	Token   session.Token
}

// ChangePasswordHandler checks the current password and stores the new one. With
// RevokeOtherSessions every session of the user is revoked in the same transaction and the
// caller continues on a new one (better-auth rotates the token the same way). Attempts are
// limited per user, so that a stolen session cannot be used to guess the password; the
// current password is checked before the new one is hashed, so a wrong guess costs one
// argon2id, not two.
type ChangePasswordHandler struct {
	users    user.Repository
	sessions port.Sessions
	hasher   port.PasswordHasher
	limiter  port.AttemptLimiter
	now      func() time.Time
}

// NewChangePasswordHandler returns the handler.
func NewChangePasswordHandler(users user.Repository, sessions port.Sessions, hasher port.PasswordHasher, limiter port.AttemptLimiter,
	now func() time.Time,
) ChangePasswordHandler {
	if users == nil || sessions == nil || hasher == nil || limiter == nil {
		panic("nil dependency")
	}
	mustClock(now)
	return ChangePasswordHandler{users: users, sessions: sessions, hasher: hasher, limiter: limiter, now: now}
}

// ChangePasswordKey is the limiter key of userID's change-password attempts.
func ChangePasswordKey(userID string) string { return "change-password:" + userID }

// Handle changes the password; auth.ErrInvalidCredentials when the current one is wrong,
// *auth.RateLimitedError past the user's limit.
func (h ChangePasswordHandler) Handle(ctx context.Context, cmd ChangePassword) (ChangePasswordResult, error) {
	rec, err := cmd.Caller.RequireSession()
	if err != nil {
		return ChangePasswordResult{}, err
	}
	if cmd.CurrentPassword == "" {
		return ChangePasswordResult{}, auth.Invalid("currentPassword", "is required")
	}
	if err := user.CheckPassword(cmd.NewPassword); err != nil {
		return ChangePasswordResult{}, err
	}
	if ok, retry := h.limiter.Allow(ctx, ChangePasswordKey(rec.User.ID())); !ok {
		return ChangePasswordResult{}, &auth.RateLimitedError{RetryAfter: retry}
	}
	// The hash the session was read with: if it changes before the new one is stored, the
	// password just checked is no longer the current one.
	checked := rec.User.PasswordHash()
	ok, err := h.hasher.Verify(ctx, cmd.CurrentPassword, checked)
	if err != nil {
		return ChangePasswordResult{}, fmt.Errorf("verify password: %w", err)
	}
	if !ok {
		return ChangePasswordResult{}, auth.ErrInvalidCredentials
	}
	hash, err := h.hasher.Hash(ctx, cmd.NewPassword)
	if err != nil {
		return ChangePasswordResult{}, fmt.Errorf("hash password: %w", err)
	}
	now := h.now()
	var updated *user.User
	err = h.users.Update(ctx, rec.User.ID(), func(_ context.Context, u *user.User) error {
		if u.PasswordHash() != checked {
			return auth.ErrInvalidCredentials
		}
		u.ChangePassword(hash, cmd.RevokeOtherSessions, now)
		updated = u
		return nil
	})
	if err != nil {
		return ChangePasswordResult{}, err
	}
	res := ChangePasswordResult{User: updated}
	if !cmd.RevokeOtherSessions {
		return res, nil
	}
	old := rec.Session
	s, tok := session.New(updated.ID(), old.ActiveOrganizationID(), cmd.IPAddress, cmd.UserAgent, now)
	if old.ActiveCleared() {
		s.ClearActiveOrganization(now)
	}
	if err := h.sessions.Add(ctx, s); err != nil {
		return ChangePasswordResult{}, fmt.Errorf("add session: %w", err)
	}
	res.Session, res.Token = s, tok
	return res, nil
}
