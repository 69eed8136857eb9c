package query

import (
	"context"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// ListWorkflows asks for one page of an organization's workflows, newest first.
type ListWorkflows struct {
	OrganizationID string
	After          *workflow.Position
	Limit          int
}

// WorkflowPage is one page; Next is set when more may follow.
type WorkflowPage struct {
	Items []workflow.Summary
	Next  *workflow.Position
}

// ListWorkflowsHandler handles ListWorkflows.
type ListWorkflowsHandler struct{ repo workflow.Repository }

// NewListWorkflowsHandler returns the handler.
func NewListWorkflowsHandler(repo workflow.Repository) ListWorkflowsHandler {
	if repo == nil {
		panic("nil repo")
	}
	return ListWorkflowsHandler{repo: repo}
}

// Handle reads one more than the page to know whether another page follows, so the last page
// says so (nextCursor null) instead of leading to an empty one.
func (h ListWorkflowsHandler) Handle(ctx context.Context, q ListWorkflows) (WorkflowPage, error) {
	items, err := h.repo.List(ctx, q.OrganizationID, q.After, q.Limit+1)
	if err != nil {
		return WorkflowPage{}, err
	}
	page := WorkflowPage{Items: items}
	if len(items) > q.Limit {
		page.Items = items[:q.Limit]
		last := page.Items[q.Limit-1]
		page.Next = &workflow.Position{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}
