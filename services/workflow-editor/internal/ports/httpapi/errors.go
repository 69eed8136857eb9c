package httpapi

import (
	"errors"
	"fmt"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// toAppError is workflow-editor's one table from domain errors to public ones.
func toAppError(err error) *errs.Error {
	var (
		public   *errs.Error
		mismatch *workflow.VersionMismatchError
		invalid  *workflow.InvalidError
		page     *wire.PageError
	)
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return errs.New(errs.NotFound, err).WithMessage("no workflow with this id in your organization")
	case errors.Is(err, workflow.ErrNameTaken):
		return errs.New(errs.WorkflowNameTaken, err).WithMessage("another workflow of your organization has this name; choose another name")
	case errors.As(err, &mismatch):
		return errs.New(errs.VersionMismatch, err).
			WithMessage(fmt.Sprintf("the workflow is at version %d, not %d: read it again (GET /api/workflows/:id) and retry with If-Match: %d", mismatch.Current, mismatch.Expected, mismatch.Current)).
			With("current", mismatch.Current)
	case errors.As(err, &invalid):
		return web400(invalid.Field, invalid.Message)
	case errors.As(err, &page):
		return errs.New(errs.InvalidQuery, err).WithMessage(page.Message)
	case errors.As(err, &public):
		return public
	case pgdb.Unavailable(err):
		// Postgres restarting or unreachable: transient, so 503 (retry), not an internal error.
		return errs.New(errs.Unavailable, err).WithMessage("the workflow store is unavailable; nothing was changed, try again")
	default:
		return errs.New(errs.InternalOnlyLog, err)
	}
}

func web400(field, msg string) *errs.Error {
	return errs.New(errs.InvalidBody, nil).WithMessage(msg).With("issues", []wire.Issue{{Path: wire.Pointer(field), Message: msg}})
}
