// Package query holds the use cases that read workflows and the catalog.
package query

import (
	"context"

	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// GetWorkflow names one workflow of an organization by ID or, when ID is empty, by Name.
type GetWorkflow struct {
	OrganizationID string
	ID             string
	Name           string
}

// GetWorkflowHandler handles GetWorkflow.
type GetWorkflowHandler struct {
	repo workflow.Repository
	cat  *catalog.Catalog
}

// NewGetWorkflowHandler returns the handler.
func NewGetWorkflowHandler(repo workflow.Repository, cat *catalog.Catalog) GetWorkflowHandler {
	if repo == nil || cat == nil {
		panic("nil dependency")
	}
	return GetWorkflowHandler{repo: repo, cat: cat}
}

// Handle returns the workflow with its validation errors, computed against the current
// catalog (so they follow a catalog change without a migration).
func (h GetWorkflowHandler) Handle(ctx context.Context, q GetWorkflow) (workflow.Checked, error) {
	var (
		w   *workflow.Workflow
		err error
	)
	switch {
	case q.ID != "":
		w, err = h.repo.Get(ctx, q.OrganizationID, q.ID)
	case q.Name != "":
		w, err = h.repo.GetByName(ctx, q.OrganizationID, q.Name)
	default:
		err = workflow.ErrNotFound
	}
	if err != nil {
		return workflow.Checked{}, err
	}
	return h.cat.Check(w), nil
}
