package schedule

import (
	"context"
	"time"
)

// Position is where a list page ends: lists run newest first, by (created_at, id) descending.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Repository stores schedules. Every method is scoped by organization: another organization's
// schedule is ErrNotFound, exactly like a missing one.
type Repository interface {
	Add(ctx context.Context, s *Schedule) error
	Get(ctx context.Context, organizationID, id string) (*Schedule, error)
	// List returns up to limit schedules, newest first, after the position (nil: from the top),
	// only those of workflowID when it is not empty, and no more than maxBytes of their inputs
	// (the first always comes): more says a schedule the byte budget left out follows.
	List(ctx context.Context, organizationID, workflowID string, after *Position, limit, maxBytes int) (items []*Schedule, more bool, err error)
	// Update runs updateFunc under the schedule's row lock and stores the schedule it changed.
	Update(ctx context.Context, organizationID, id string, updateFunc func(s *Schedule) error) error
	Delete(ctx context.Context, organizationID, id string) error
}

// FireQueue is the tick's side of the store: claiming due schedules and dispatching the fires
// they left in the outbox. Both lock rows with FOR UPDATE SKIP LOCKED, so any number of ticks
// on any number of replicas share the work and never take the same row.
type FireQueue interface {
	// ClaimDue claims up to limit schedules due at now, of every organization: in one
	// transaction, each one's fire record (unique per schedule and cutoff, pending: the outbox
	// entry) and the advance of its last_fired_at and next fire time. It returns the fires.
	ClaimDue(ctx context.Context, now time.Time, limit int) ([]Fire, error)
	// DispatchPending locks up to limit pending fires whose next attempt is due at now, calls
	// dispatchFunc with them while it holds the locks, and stores the outcomes it returns (one
	// per fire) in the same transaction: dispatched, failed (and the schedule disabled when the
	// workflow is gone) or still pending with a later next attempt.
	DispatchPending(ctx context.Context, now time.Time, limit int, dispatchFunc func(ctx context.Context, fires []Fire) []Outcome) (int, error)
}
