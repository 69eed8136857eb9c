package command

import (
	"context"

	"svc.dev/services/scheduler/internal/domain/schedule"
)

// DeleteSchedule removes a schedule with its fires; runs already started are unaffected.
type DeleteSchedule struct {
	OrganizationID string
	ID             string
}

// DeleteScheduleHandler handles DeleteSchedule.
type DeleteScheduleHandler struct{ repo schedule.Repository }

// NewDeleteScheduleHandler returns the handler.
func NewDeleteScheduleHandler(repo schedule.Repository) DeleteScheduleHandler {
	if repo == nil {
		panic("nil repo")
	}
	return DeleteScheduleHandler{repo: repo}
}

// Handle deletes the schedule.
func (h DeleteScheduleHandler) Handle(ctx context.Context, cmd DeleteSchedule) error {
	return h.repo.Delete(ctx, cmd.OrganizationID, cmd.ID)
}
