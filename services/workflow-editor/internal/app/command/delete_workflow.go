package command

import (
	"context"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// DeleteWorkflow removes a workflow. Runs already started keep the definition they pinned.
type DeleteWorkflow struct {
	OrganizationID string
	ID             string
}

// DeleteWorkflowHandler handles DeleteWorkflow.
type DeleteWorkflowHandler struct{ repo workflow.Repository }

// NewDeleteWorkflowHandler returns the handler.
func NewDeleteWorkflowHandler(repo workflow.Repository) DeleteWorkflowHandler {
	if repo == nil {
		panic("nil repo")
	}
	return DeleteWorkflowHandler{repo: repo}
}

// Handle deletes the workflow.
func (h DeleteWorkflowHandler) Handle(ctx context.Context, cmd DeleteWorkflow) error {
	return h.repo.Delete(ctx, cmd.OrganizationID, cmd.ID)
}
