package command

import (
	"context"
	"time"

	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// DescribeWorkflow renames a workflow and/or changes its description (nil leaves a field as it
// is), honouring IfMatch.
type DescribeWorkflow struct {
	OrganizationID string
	ID             string
	IfMatch        *int64
	Name           *string
	Description    *string
}

// DescribeWorkflowHandler handles DescribeWorkflow.
type DescribeWorkflowHandler struct {
	repo workflow.Repository
	cat  *catalog.Catalog
	now  func() time.Time
}

// NewDescribeWorkflowHandler returns the handler.
func NewDescribeWorkflowHandler(repo workflow.Repository, cat *catalog.Catalog, now func() time.Time) DescribeWorkflowHandler {
	if repo == nil || cat == nil || now == nil {
		panic("nil dependency")
	}
	return DescribeWorkflowHandler{repo: repo, cat: cat, now: now}
}

// Handle changes the workflow and returns it as stored.
func (h DescribeWorkflowHandler) Handle(ctx context.Context, cmd DescribeWorkflow) (workflow.Checked, error) {
	var result *workflow.Workflow
	err := h.repo.Update(ctx, cmd.OrganizationID, cmd.ID, func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
		if err := w.CheckVersion(cmd.IfMatch); err != nil {
			return nil, err
		}
		if err := w.Describe(cmd.Name, cmd.Description, h.now()); err != nil {
			return nil, err
		}
		result = w
		return w, nil
	})
	if err != nil {
		return workflow.Checked{}, err
	}
	return h.cat.Check(result), nil
}
