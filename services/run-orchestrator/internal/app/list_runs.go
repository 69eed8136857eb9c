package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// ListRuns asks for a page of an organization's runs. A Filter.WorkflowID must name a
// workflow of the organization.
type ListRuns struct {
	OrganizationID string
	Filter         run.ListFilter
}

// UnavailableError is a peer that could not answer (the editor): 503 unavailable.
type UnavailableError struct {
	Message string
	Err     error
}

func (e *UnavailableError) Error() string { return fmt.Sprintf("%s: %v", e.Message, e.Err) }
func (e *UnavailableError) Unwrap() error { return e.Err }

// ListRunsHandler lists runs, refusing a workflow filter that names another organization's
// workflow (or none) instead of answering an empty list that would tell "yours, no runs" and
// "not yours" apart only by luck.
type ListRunsHandler struct {
	reader  RunReader
	catalog WorkflowCatalog
}

// NewListRunsHandler returns the handler; both ports are required.
func NewListRunsHandler(reader RunReader, catalog WorkflowCatalog) ListRunsHandler {
	if reader == nil || catalog == nil {
		panic("nil reader or catalog")
	}
	return ListRunsHandler{reader: storeReader{reader}, catalog: catalog}
}

// Handle returns the page (newest first, at most Filter.Limit), run.ErrWorkflowNotFound when
// the workflow filter names no workflow of the organization, or *UnavailableError when the
// editor could not say.
//
// The workflow is the organization's when it has runs of it there (runs are stored under
// their organization, and workflow ids are unique), else when the editor has it there. So a
// deleted workflow whose runs remain still lists them, as GET /api/runs/:id still shows each;
// a foreign workflow and a missing one are both run.ErrWorkflowNotFound, alike. The editor is
// asked only when the page is empty.
func (h ListRunsHandler) Handle(ctx context.Context, q ListRuns) ([]run.Record, error) {
	wf := q.Filter.WorkflowID
	if strings.ContainsRune(wf, 0) || !utf8.ValidString(wf) {
		// No workflow has such an id, and Postgres refuses it as text: answer without asking.
		return nil, run.ErrWorkflowNotFound
	}
	recs, err := h.reader.List(ctx, q.OrganizationID, q.Filter)
	if err != nil || wf == "" || len(recs) > 0 {
		return recs, err
	}
	if q.Filter.After != "" || q.Filter.Status != "" {
		// The page is narrowed: any run of the workflow in the organization proves it is its.
		some, err := h.reader.List(ctx, q.OrganizationID, run.ListFilter{WorkflowID: wf, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(some) > 0 {
			return recs, nil
		}
	}
	_, err = h.catalog.Workflow(ctx, q.OrganizationID, WorkflowRef{ID: wf})
	switch {
	case errors.Is(err, run.ErrWorkflowNotFound):
		return nil, run.ErrWorkflowNotFound
	case err != nil:
		return nil, &UnavailableError{Message: "the workflow editor is unreachable; the workflow could not be checked", Err: err}
	}
	return recs, nil
}
