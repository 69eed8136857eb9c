// Package command holds the use cases that change workflows.
package command

import (
	"context"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// CreateWorkflow makes a workflow; Ops (the given definition as add and connect operations)
// are applied to it as one batch, and the workflow starts at version 1 whatever they do.
type CreateWorkflow struct {
	OrganizationID string
	Name           string
	Description    string
	Ops            []workflow.Op
}

// CreatedWorkflow is the new workflow and the operations of its definition that were skipped.
type CreatedWorkflow struct {
	workflow.Checked
	Skipped []workflow.Skip
}

// CreateWorkflowHandler handles CreateWorkflow.
type CreateWorkflowHandler struct {
	repo workflow.Repository
	cat  *catalog.Catalog
	now  func() time.Time
}

// NewCreateWorkflowHandler returns the handler.
func NewCreateWorkflowHandler(repo workflow.Repository, cat *catalog.Catalog, now func() time.Time) CreateWorkflowHandler {
	if repo == nil || cat == nil || now == nil {
		panic("nil dependency")
	}
	return CreateWorkflowHandler{repo: repo, cat: cat, now: now}
}

// Handle creates the workflow.
func (h CreateWorkflowHandler) Handle(ctx context.Context, cmd CreateWorkflow) (CreatedWorkflow, error) {
	w, out, err := workflow.NewWithDefinition(wire.NewID(wire.Workflow), cmd.OrganizationID, cmd.Name, cmd.Description, h.cat, cmd.Ops, h.now())
	if err != nil {
		return CreatedWorkflow{}, err
	}
	if err := h.repo.Add(ctx, w); err != nil {
		return CreatedWorkflow{}, err
	}
	checked := h.cat.Check(w)
	checked.ValidationErrors = h.cat.InLightOf(checked.ValidationErrors, cmd.Ops, out.Skipped)
	return CreatedWorkflow{Checked: checked, Skipped: out.Skipped}, nil
}
