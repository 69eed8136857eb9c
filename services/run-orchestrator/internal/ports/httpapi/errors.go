package httpapi

import (
	"errors"

	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// toAppError is the service's one table from domain errors to public codes.
func toAppError(err error) *errs.Error {
	var (
		fe *run.FinishedError
		we *run.InvalidWorkflowError
		ie *run.InvalidInputError
		de *port.DispatchError
		ce *port.CancelError
		ue *port.UnavailableError
		pe *wire.PageError
		re *run.InvalidRetentionError
		e  *errs.Error
	)
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, run.ErrNotFound), errors.Is(err, run.ErrWorkflowNotFound):
		return errs.New(errs.NotFound, err)
	case errors.As(err, &fe):
		return errs.New(errs.RunFinished, err).WithMessage("the run is already "+string(fe.Status)).With("status", string(fe.Status))
	case errors.As(err, &we):
		return errs.New(errs.WorkflowInvalid, err).WithMessage("the workflow has validation errors; fix them before running it").
			With("validation_errors", we.Errors)
	case errors.As(err, &ie):
		issues := make([]wire.Issue, len(ie.Issues))
		for i, is := range ie.Issues {
			issues[i] = wire.Issue{Path: is.Path, Message: is.Message}
		}
		return errs.New(errs.InvalidBody, err).WithMessage(ie.Error()).With("issues", issues)
	case errors.As(err, &de):
		return errs.New(errs.DispatchFailed, err).WithMessage(de.Message)
	case errors.As(err, &ce):
		return errs.New(errs.CancelFailed, err).WithMessage("the run could not be cancelled; try again")
	case errors.As(err, &ue):
		return errs.New(errs.Unavailable, err).WithMessage(ue.Message + "; try again")
	case errors.Is(err, run.ErrForbidden):
		return errs.New(errs.Forbidden, err).WithMessage(err.Error())
	case errors.As(err, &re):
		return errs.New(errs.InvalidBody, err).WithMessage(re.Message).With("issues", []wire.Issue{{Path: "/runRetention", Message: re.Message}})
	case errors.As(err, &pe):
		return errs.New(errs.InvalidQuery, err).WithMessage(pe.Message)
	default:
		return errs.New(errs.InternalOnlyLog, err)
	}
}
