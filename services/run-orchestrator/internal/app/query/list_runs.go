package query

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// ListRuns asks for a page of an organization's runs. A Filter.WorkflowID must name a
// workflow of the organization. MaxBytes bounds the page's bytes (0: port.PageBytes).
type ListRuns struct {
	OrganizationID string
	Filter         run.ListFilter
	MaxBytes       int64
}

// ListRunsHandler lists runs, refusing a workflow filter that names another organization's
// workflow (or none) instead of answering an empty list that would tell "yours, no runs" and
// "not yours" apart only by luck.
type ListRunsHandler struct {
	reader  Runs
	catalog port.WorkflowCatalog
}

// NewListRunsHandler returns the handler; both ports are required.
func NewListRunsHandler(reader port.RunReader, catalog port.WorkflowCatalog) ListRunsHandler {
	if reader == nil || catalog == nil {
		panic("nil reader or catalog")
	}
	return ListRunsHandler{reader: NewRuns(reader), catalog: catalog}
}

// Handle returns the page (newest first, at most Filter.Limit runs and no more than fit in
// MaxBytes), run.ErrWorkflowNotFound when the workflow filter names no workflow of the
// organization, or *port.UnavailableError when the editor could not say.
//
// The workflow is the organization's when it has runs of it there (runs are stored under
// their organization, and workflow ids are unique), else when the editor has it there. So a
// deleted workflow whose runs remain still lists them, as GET /api/runs/:id still shows each;
// a foreign workflow and a missing one are both run.ErrWorkflowNotFound, alike. The editor is
// asked only when the page is empty.
func (h ListRunsHandler) Handle(ctx context.Context, q ListRuns) (port.RunPage, error) {
	wf := q.Filter.WorkflowID
	if strings.ContainsRune(wf, 0) || !utf8.ValidString(wf) {
		// No workflow has such an id, and Postgres refuses it as text: answer without asking.
		return port.RunPage{}, run.ErrWorkflowNotFound
	}
	maxBytes := q.MaxBytes
	if maxBytes <= 0 {
		maxBytes = port.PageBytes
	}
	page, err := h.reader.List(ctx, q.OrganizationID, q.Filter, maxBytes)
	if err != nil || wf == "" || len(page.Runs) > 0 {
		return page, err
	}
	if q.Filter.After != "" || q.Filter.Status != "" {
		// The page is narrowed: any run of the workflow in the organization proves it is its.
		some, err := h.reader.List(ctx, q.OrganizationID, run.ListFilter{WorkflowID: wf, Limit: 1}, maxBytes)
		if err != nil {
			return port.RunPage{}, err
		}
		if len(some.Runs) > 0 {
			return page, nil
		}
	}
	_, err = h.catalog.Workflow(ctx, q.OrganizationID, port.WorkflowRef{ID: wf})
	switch {
	case errors.Is(err, run.ErrWorkflowNotFound):
		return port.RunPage{}, run.ErrWorkflowNotFound
	case err != nil:
		return port.RunPage{}, &port.UnavailableError{Message: "the workflow editor is unreachable; the workflow could not be checked", Err: err}
	}
	return page, nil
}
