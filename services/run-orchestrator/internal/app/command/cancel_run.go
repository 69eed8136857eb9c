package command

import (
	"context"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/app/port"
)

// CancelRun cancels run RunID of organization OrganizationID.
type CancelRun struct {
	OrganizationID, RunID string
}

// CancelRunHandler cancels runs through the engine.
type CancelRunHandler struct{ engine port.Engine }

// NewCancelRunHandler returns the handler over engine.
func NewCancelRunHandler(engine port.Engine) CancelRunHandler {
	if engine == nil {
		panic("nil engine")
	}
	return CancelRunHandler{engine: engine}
}

// Handle cancels a run: its status afterwards, *run.FinishedError, run.ErrNotFound, an
// *UnavailableError or a *CancelError.
func (h CancelRunHandler) Handle(ctx context.Context, c CancelRun) (string, error) {
	st, err := h.engine.Cancel(ctx, c.OrganizationID, c.RunID)
	if err != nil {
		if port.IsDomain(err) {
			return "", err
		}
		if pgdb.Unavailable(err) {
			return "", port.StoreError(err)
		}
		return "", &port.CancelError{Err: err}
	}
	return string(st), nil
}
