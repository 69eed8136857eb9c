package query

import (
	"context"
	"errors"
	"fmt"

	"svc.dev/libs/wire"
	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/app/port"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// ErrUnknownWorkflow is a workflowId filter naming no workflow of the organization: another
// organization's workflow is not found, never an empty list.
var ErrUnknownWorkflow = errors.New("no workflow with this id in the organization")

// ErrWorkflowsUnavailable is a filter the editor could not check.
var ErrWorkflowsUnavailable = errors.New("the workflow editor is unavailable")

// ListSchedules asks for one page of an organization's schedules, newest first, only those of
// WorkflowID when it is set.
type ListSchedules struct {
	OrganizationID string
	WorkflowID     string
	// Filtered is set when the request named a workflowId, even an empty one.
	Filtered bool
	After    *schedule.Position
	Limit    int
}

// PageBytes is the most of schedule inputs one page holds (the first schedule always comes):
// a limit of 500 schedules of 1 MiB inputs would otherwise be 500 MiB built in memory.
const PageBytes = 1 << 20

// SchedulePage is one page; Next is set when more follow.
type SchedulePage struct {
	Items []*schedule.Schedule
	Next  *schedule.Position
}

// ListSchedulesHandler handles ListSchedules.
type ListSchedulesHandler struct {
	repo      schedule.Repository
	workflows port.Workflows
}

// NewListSchedulesHandler returns the handler.
func NewListSchedulesHandler(repo schedule.Repository, workflows port.Workflows) ListSchedulesHandler {
	if repo == nil || workflows == nil {
		panic("nil repo or workflows")
	}
	return ListSchedulesHandler{repo: repo, workflows: workflows}
}

// Handle reads one more than the page to know whether another page follows, so the last page
// says so (nextCursor null) instead of leading to an empty one.
//
// Filtered by a workflow the organization has no schedule of, it asks the editor whether the
// workflow is the organization's at all: ErrUnknownWorkflow when not (a schedule exists only
// for a workflow its organization had, so a list with items needs no such call).
func (h ListSchedulesHandler) Handle(ctx context.Context, q ListSchedules) (SchedulePage, error) {
	filtered := q.WorkflowID != "" || q.Filtered
	if filtered && !wire.ValidID(wire.Workflow, q.WorkflowID) {
		return SchedulePage{}, ErrUnknownWorkflow
	}
	items, cut, err := h.repo.List(ctx, q.OrganizationID, q.WorkflowID, q.After, q.Limit+1, PageBytes)
	if err != nil {
		return SchedulePage{}, err
	}
	if filtered && len(items) == 0 && q.After == nil {
		switch err := command.CheckWorkflow(ctx, h.workflows, q.OrganizationID, q.WorkflowID); {
		case errors.Is(err, schedule.ErrWorkflowNotFound):
			return SchedulePage{}, ErrUnknownWorkflow
		case err != nil:
			return SchedulePage{}, fmt.Errorf("%w: %w", ErrWorkflowsUnavailable, err)
		}
	}
	page := SchedulePage{Items: items}
	if cut && len(items) <= q.Limit {
		// The byte budget stopped the page and another schedule follows.
		last := items[len(items)-1]
		page.Next = &schedule.Position{CreatedAt: last.CreatedAt(), ID: last.ID()}
		return page, nil
	}
	if len(items) > q.Limit {
		page.Items = items[:q.Limit]
		last := page.Items[q.Limit-1]
		page.Next = &schedule.Position{CreatedAt: last.CreatedAt(), ID: last.ID()}
	}
	return page, nil
}
