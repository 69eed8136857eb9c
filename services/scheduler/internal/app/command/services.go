// Package command holds the use cases that change schedules and fire them.
package command

import (
	"context"

	"svc.dev/services/scheduler/internal/domain/schedule"
)

// Workflows answers whether an organization has a workflow (workflow-editor's internal API).
type Workflows interface {
	// Exists reports whether organizationID has the workflow; an error means the editor could
	// not answer.
	Exists(ctx context.Context, organizationID, workflowID string) (bool, error)
}

// Dispatcher starts the run of a fire (run-orchestrator's internal API), with the fire's
// idempotency key, so a retried dispatch never starts a second run.
type Dispatcher interface {
	// Dispatch returns the outcome: a run id, or a final failure code (workflow_not_found,
	// workflow_invalid, invalid_body). An error means the orchestrator could not answer and the
	// fire is to be retried.
	Dispatch(ctx context.Context, f schedule.Fire) (schedule.Outcome, error)
}
