package httpapi

import (
	"errors"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/app/query"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// toAppError is scheduler's one table from domain errors to public ones:
// every code gets its status here and nowhere else.
func toAppError(err error) *errs.Error {
	var (
		public  *errs.Error
		cron    *schedule.InvalidCronError
		invalid *schedule.InvalidError
		page    *wire.PageError
	)
	switch {
	case errors.Is(err, schedule.ErrNotFound):
		return errs.New(errs.NotFound, err).WithMessage("no schedule with this id in your organization")
	case errors.Is(err, query.ErrUnknownWorkflow):
		return errs.New(errs.NotFound, err).WithMessage("your organization has no workflow with this workflowId")
	case errors.Is(err, query.ErrWorkflowsUnavailable):
		return errs.New(errs.Unavailable, err).WithMessage("the workflow editor could not be reached to check workflowId; try again")
	case errors.Is(err, schedule.ErrWorkflowNotFound):
		return errs.New(errs.WorkflowNotFound, err).WithMessage("your organization has no workflow with this workflowId")
	case errors.As(err, &cron):
		return errs.New(errs.InvalidCron, err).WithMessage(cron.Message)
	case errors.As(err, &invalid):
		return errs.New(errs.InvalidBody, err).WithMessage(invalid.Message).
			With("issues", []wire.Issue{{Path: wire.Pointer(invalid.Field), Message: invalid.Message}})
	case errors.As(err, &page):
		return errs.New(errs.InvalidQuery, err).WithMessage(page.Message)
	case errors.As(err, &public):
		return public
	case errors.Is(err, command.ErrWorkflowsUnavailable):
		return errs.New(errs.Unavailable, err).WithMessage("the workflow editor could not be reached; nothing was changed, try again")
	case pgdb.Unavailable(err):
		// Postgres restarting or unreachable: transient, so 503 (retry), not an internal error.
		return errs.New(errs.Unavailable, err).WithMessage("the schedule store is unavailable; try again")
	default:
		return errs.New(errs.InternalOnlyLog, err)
	}
}
