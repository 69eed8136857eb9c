package workflow

import (
	"context"
	"time"
)

// Summary is a workflow as lists show it: without its definition.
type Summary struct {
	ID          string
	Name        string
	Description string
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Position is where a list page ends: lists run newest first, by (created_at, id) descending.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Repository stores workflows. Every method is scoped by organization: another organization's
// workflow is ErrNotFound, exactly like a missing one.
type Repository interface {
	// Add stores a new workflow; ErrNameTaken when its organization has the name already.
	Add(ctx context.Context, w *Workflow) error
	// Get returns a workflow by id.
	Get(ctx context.Context, organizationID, id string) (*Workflow, error)
	// GetByName returns a workflow by name.
	GetByName(ctx context.Context, organizationID, name string) (*Workflow, error)
	// List returns up to limit workflows, newest first, after the position (nil: from the top).
	List(ctx context.Context, organizationID string, after *Position, limit int) ([]Summary, error)
	// Update runs updateFunc on the workflow under an exclusive lock held until it returns, and
	// stores what it returns when its version differs from the one loaded (so a function that
	// changed nothing writes nothing). An error from updateFunc is returned as is and nothing
	// is stored. ErrNameTaken when the new name is taken.
	Update(ctx context.Context, organizationID, id string, updateFunc func(ctx context.Context, w *Workflow) (*Workflow, error)) error
	// Delete removes a workflow.
	Delete(ctx context.Context, organizationID, id string) error
}
