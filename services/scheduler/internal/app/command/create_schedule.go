package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/scheduler/internal/app/port"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// CreateSchedule makes a schedule of a workflow of the organization.
type CreateSchedule struct {
	OrganizationID string
	WorkflowID     string
	Cron           string
	Timezone       string
	Input          json.RawMessage
	Enabled        bool
}

// CreateScheduleHandler handles CreateSchedule.
type CreateScheduleHandler struct {
	repo      schedule.Repository
	workflows port.Workflows
	now       func() time.Time
}

// NewCreateScheduleHandler returns the handler.
func NewCreateScheduleHandler(repo schedule.Repository, workflows port.Workflows, now func() time.Time) CreateScheduleHandler {
	if repo == nil || workflows == nil || now == nil {
		panic("nil dependency")
	}
	return CreateScheduleHandler{repo: repo, workflows: workflows, now: now}
}

// Handle checks the cron first (400 before any call), then that the organization has the
// workflow, and stores the schedule.
func (h CreateScheduleHandler) Handle(ctx context.Context, cmd CreateSchedule) (*schedule.Schedule, error) {
	c, err := schedule.ParseCron(cmd.Cron, cmd.Timezone)
	if err != nil {
		return nil, err
	}
	if err := CheckWorkflow(ctx, h.workflows, cmd.OrganizationID, cmd.WorkflowID); err != nil {
		return nil, err
	}
	s, err := schedule.New(wire.NewID(wire.Schedule), cmd.OrganizationID, cmd.WorkflowID, c, cmd.Input, cmd.Enabled, h.now())
	if err != nil {
		return nil, err
	}
	if err := h.repo.Add(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrWorkflowsUnavailable is a workflow check the editor could not answer.
var ErrWorkflowsUnavailable = errors.New("the workflow editor is unavailable")

// CheckWorkflow returns schedule.ErrWorkflowNotFound unless the organization has the workflow,
// or an error wrapping ErrWorkflowsUnavailable when the editor could not say.
func CheckWorkflow(ctx context.Context, workflows port.Workflows, org, id string) error {
	if !wire.ValidID(wire.Workflow, id) {
		return schedule.ErrWorkflowNotFound
	}
	ok, err := workflows.Exists(ctx, org, id)
	if err != nil {
		return fmt.Errorf("check workflow %s: %w: %w", id, ErrWorkflowsUnavailable, err)
	}
	if !ok {
		return schedule.ErrWorkflowNotFound
	}
	return nil
}
