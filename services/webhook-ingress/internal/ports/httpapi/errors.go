package httpapi

import (
	"errors"

	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/webhook-ingress/internal/app/command"
	"svc.dev/services/webhook-ingress/internal/app/port"
	"svc.dev/services/webhook-ingress/internal/domain/route"
)

// toAppError is webhook-ingress's one table from the use case's errors to public ones (the
// codes and their statuses: docs/API.md, "The error codes"). Everything a sender can cause
// maps to a 4xx; only a peer that cannot answer (identity, the orchestrator) is a 503, which
// senders retry.
func toAppError(err error) *errs.Error {
	var (
		public   *errs.Error
		sig      *route.SignatureError
		rejected *route.RejectedError
		invalid  *command.InvalidInputError
		refused  *port.DispatchRejectedError
		down     *port.UnavailableError
		tooLarge *command.InputTooLargeError
	)
	switch {
	case errors.As(err, &sig):
		return errs.New(errs.InvalidSignature, err).WithMessage(sig.Reason)
	case errors.As(err, &rejected):
		return errs.New(errs.WebhookRejected, err).WithMessage(rejected.Reason)
	case errors.As(err, &invalid):
		return invalidBody(invalid.Issues)
	case errors.Is(err, port.ErrWorkflowNotFound):
		return errs.New(errs.WorkflowNotFound, err).WithMessage("the workflow this route starts does not exist in its organization")
	case errors.As(err, &refused):
		switch refused.Code {
		case string(errs.WorkflowInvalid):
			return errs.New(errs.WorkflowInvalid, err).WithMessage(refused.Message)
		case string(errs.InvalidBody):
			return invalidBody([]command.Issue{{Path: "", Message: refused.Message}})
		default:
			return errs.New(errs.WebhookRejected, err).WithMessage(refused.Message)
		}
	case errors.As(err, &tooLarge):
		return errs.New(errs.PayloadTooLarge, err).WithMessage(tooLarge.Error())
	case errors.As(err, &down):
		return errs.New(errs.Unavailable, err).WithMessage("runs cannot be started right now; nothing was started, deliver again later")
	case errors.As(err, &public):
		return public
	default:
		return errs.New(errs.InternalOnlyLog, err)
	}
}

func invalidBody(issues []command.Issue) *errs.Error {
	out := make([]wire.Issue, 0, len(issues))
	for _, i := range issues {
		out = append(out, wire.Issue{Path: i.Path, Message: i.Message})
	}
	msg := "the run input does not match the route's schema"
	if len(out) > 0 {
		msg = out[0].Message
	}
	return errs.New(errs.InvalidBody, nil).WithMessage(msg).With("issues", out)
}
