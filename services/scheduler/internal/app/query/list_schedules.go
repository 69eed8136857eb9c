package query

import (
	"context"

	"svc.dev/services/scheduler/internal/domain/schedule"
)

// ListSchedules asks for one page of an organization's schedules, newest first, only those of
// WorkflowID when it is set.
type ListSchedules struct {
	OrganizationID string
	WorkflowID     string
	After          *schedule.Position
	Limit          int
}

// SchedulePage is one page; Next is set when more follow.
type SchedulePage struct {
	Items []*schedule.Schedule
	Next  *schedule.Position
}

// ListSchedulesHandler handles ListSchedules.
type ListSchedulesHandler struct{ repo schedule.Repository }

// NewListSchedulesHandler returns the handler.
func NewListSchedulesHandler(repo schedule.Repository) ListSchedulesHandler {
	if repo == nil {
		panic("nil repo")
	}
	return ListSchedulesHandler{repo: repo}
}

// Handle reads one more than the page to know whether another page follows, so the last page
// says so (nextCursor null) instead of leading to an empty one.
func (h ListSchedulesHandler) Handle(ctx context.Context, q ListSchedules) (SchedulePage, error) {
	items, err := h.repo.List(ctx, q.OrganizationID, q.WorkflowID, q.After, q.Limit+1)
	if err != nil {
		return SchedulePage{}, err
	}
	page := SchedulePage{Items: items}
	if len(items) > q.Limit {
		page.Items = items[:q.Limit]
		last := page.Items[q.Limit-1]
		page.Next = &schedule.Position{CreatedAt: last.CreatedAt(), ID: last.ID()}
	}
	return page, nil
}
