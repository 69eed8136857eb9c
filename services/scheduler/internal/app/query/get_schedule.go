// Package query holds the use cases that read schedules.
package query

import (
	"context"

	"svc.dev/services/scheduler/internal/domain/schedule"
)

// GetSchedule names one schedule of an organization.
type GetSchedule struct {
	OrganizationID string
	ID             string
}

// GetScheduleHandler handles GetSchedule.
type GetScheduleHandler struct{ repo schedule.Repository }

// NewGetScheduleHandler returns the handler.
func NewGetScheduleHandler(repo schedule.Repository) GetScheduleHandler {
	if repo == nil {
		panic("nil repo")
	}
	return GetScheduleHandler{repo: repo}
}

// Handle returns the schedule.
func (h GetScheduleHandler) Handle(ctx context.Context, q GetSchedule) (*schedule.Schedule, error) {
	return h.repo.Get(ctx, q.OrganizationID, q.ID)
}
