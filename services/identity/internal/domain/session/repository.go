package session

import (
	"context"
	"time"
)

// Repository stores sessions.
type Repository interface {
	Add(ctx context.Context, s *Session) error
	// Update loads the session under a row lock, applies updateFunc and saves it.
	Update(ctx context.Context, id string, updateFunc func(ctx context.Context, s *Session) error) error
	// Extend moves a session's expiry to expiresAt unless it is already later: a cheap,
	// lock-free write for the sliding refresh on the request path.
	Extend(ctx context.Context, id string, expiresAt time.Time) error
	// Delete removes the session; deleting a missing one is not an error.
	Delete(ctx context.Context, id string) error
}
