package command

import (
	"context"
	"time"

	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// EditWorkflow applies a batch of operations (the patch endpoint). IfMatch, when set, is the
// version the client expects; it is checked under the same lock as the apply.
type EditWorkflow struct {
	OrganizationID string
	ID             string
	IfMatch        *int64
	Ops            []workflow.Op
}

// EditResult is what a patch did.
type EditResult struct {
	Version          int64
	Applied          int
	Skipped          []workflow.Skip
	ValidationErrors []workflow.ValidationError
	Definition       workflow.Definition
}

// EditWorkflowHandler handles EditWorkflow.
type EditWorkflowHandler struct {
	repo workflow.Repository
	cat  *catalog.Catalog
	now  func() time.Time
}

// NewEditWorkflowHandler returns the handler.
func NewEditWorkflowHandler(repo workflow.Repository, cat *catalog.Catalog, now func() time.Time) EditWorkflowHandler {
	if repo == nil || cat == nil || now == nil {
		panic("nil dependency")
	}
	return EditWorkflowHandler{repo: repo, cat: cat, now: now}
}

// Handle applies the batch.
func (h EditWorkflowHandler) Handle(ctx context.Context, cmd EditWorkflow) (EditResult, error) {
	var res EditResult
	err := h.repo.Update(ctx, cmd.OrganizationID, cmd.ID, func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
		if err := w.CheckVersion(cmd.IfMatch); err != nil {
			return nil, err
		}
		out := w.Edit(h.cat, cmd.Ops, h.now())
		res = EditResult{Version: w.Version(), Applied: out.Applied, Skipped: out.Skipped, Definition: w.Definition()}
		return w, nil
	})
	if err != nil {
		return EditResult{}, err
	}
	// Validation runs after the lock is released: it only reads the result. It is remembered
	// for the version, which the next read of the workflow then finds validated.
	res.ValidationErrors = h.cat.InLightOf(h.cat.ValidateVersion(cmd.ID, res.Version, res.Definition), cmd.Ops, res.Skipped)
	return res, nil
}
