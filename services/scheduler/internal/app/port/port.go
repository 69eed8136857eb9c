// Package port declares what the scheduler's use cases need from its peers: workflow-editor,
// to know a workflow exists, and run-orchestrator, to start the runs of fires.
package port

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

// Dispatcher starts the runs of fires (run-orchestrator's internal API), each with its fire's
// idempotency key, so a retried dispatch never starts a second run.
type Dispatcher interface {
	// Dispatch starts the runs of fires in one call and returns one outcome per fire, in
	// order: a run id, or a final failure code (workflow_not_found, workflow_invalid,
	// invalid_body). An error means the orchestrator did not answer: every fire is to be
	// retried, and its key makes a retry answer the run a lost answer had started.
	Dispatch(ctx context.Context, fires []schedule.Fire) ([]schedule.Outcome, error)
}
