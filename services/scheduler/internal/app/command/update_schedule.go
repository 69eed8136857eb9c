package command

import (
	"context"
	"encoding/json"
	"time"

	"svc.dev/services/scheduler/internal/app/port"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// UpdateSchedule changes some members of a schedule; nil members stay as they are. A new
// Cron or Timezone is checked together with the other one's current value.
type UpdateSchedule struct {
	OrganizationID string
	ID             string
	WorkflowID     *string
	Cron           *string
	Timezone       *string
	Input          json.RawMessage
	Enabled        *bool
}

// UpdateScheduleHandler handles UpdateSchedule.
type UpdateScheduleHandler struct {
	repo      schedule.Repository
	workflows port.Workflows
	now       func() time.Time
}

// NewUpdateScheduleHandler returns the handler.
func NewUpdateScheduleHandler(repo schedule.Repository, workflows port.Workflows, now func() time.Time) UpdateScheduleHandler {
	if repo == nil || workflows == nil || now == nil {
		panic("nil dependency")
	}
	return UpdateScheduleHandler{repo: repo, workflows: workflows, now: now}
}

// Handle applies the change under the schedule's lock. The workflow check happens before the
// lock is taken: a peer call never holds a row lock.
func (h UpdateScheduleHandler) Handle(ctx context.Context, cmd UpdateSchedule) (*schedule.Schedule, error) {
	if cmd.WorkflowID != nil {
		if _, err := h.repo.Get(ctx, cmd.OrganizationID, cmd.ID); err != nil {
			return nil, err // a missing schedule is not_found before its workflow is looked at
		}
		if err := CheckWorkflow(ctx, h.workflows, cmd.OrganizationID, *cmd.WorkflowID); err != nil {
			return nil, err
		}
	}
	var out *schedule.Schedule
	err := h.repo.Update(ctx, cmd.OrganizationID, cmd.ID, func(s *schedule.Schedule) error {
		change := schedule.Change{WorkflowID: cmd.WorkflowID, Input: cmd.Input, Enabled: cmd.Enabled}
		if cmd.Cron != nil || cmd.Timezone != nil {
			expr, tz := s.Cron().Expr(), s.Cron().Timezone()
			if cmd.Cron != nil {
				expr = *cmd.Cron
			}
			if cmd.Timezone != nil {
				tz = *cmd.Timezone
			}
			c, err := schedule.ParseCron(expr, tz)
			if err != nil {
				return err
			}
			change.Cron = &c
		}
		if err := s.Apply(change, h.now()); err != nil {
			return err
		}
		out = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
