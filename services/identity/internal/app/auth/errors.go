// Package auth is what identity's use cases share about the caller: the session a request
// authenticated with (sliding refresh and the automatic choice of an active organization
// included), the rules that need a session rather than an API key, and the errors of the
// auth layer that are not any one aggregate's.
package auth

import (
	"errors"
	"fmt"
	"time"
)

// The errors of the auth layer.
var (
	ErrUnauthenticated      = errors.New("a valid session is required")
	ErrKeyCannotManageKeys  = errors.New("API keys cannot manage API keys; sign in and use the session")
	ErrInvalidCredentials   = errors.New("invalid email or password")
	ErrNoActiveOrganization = errors.New("no active organization; call organization/set-active")
	ErrInvalidResetToken    = errors.New("invalid or expired reset token")
	ErrInvalidAPIKey        = errors.New("API key is missing, revoked or expired")
	ErrBootstrapClosed      = errors.New("bootstrap is closed")
)

// RateLimitedError says an attempt was refused by the attempt limiter.
type RateLimitedError struct{ RetryAfter time.Duration }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many attempts; retry in %s", e.RetryAfter.Round(time.Second))
}

// ValidationError is a request field that breaks a rule. Field is a JSON member name.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return "[body." + e.Field + "] " + e.Message
}

// Invalid returns a ValidationError.
func Invalid(field, message string) error { return &ValidationError{Field: field, Message: message} }
