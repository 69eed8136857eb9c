package command

import (
	"context"
	"encoding/json"
	"errors"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// SignalRun sends signal Name with Payload to run RunID of organization OrganizationID.
type SignalRun struct {
	OrganizationID, RunID, Name string
	Payload                     json.RawMessage
}

// SignalRunHandler signals runs through the engine.
type SignalRunHandler struct{ engine port.Engine }

// NewSignalRunHandler returns the handler over engine.
func NewSignalRunHandler(engine port.Engine) SignalRunHandler {
	if engine == nil {
		panic("nil engine")
	}
	return SignalRunHandler{engine: engine}
}

// Handle stores a signal for a run and wakes it when a wait consumes it; one that no wait
// consumed says what the run waits for.
func (h SignalRunHandler) Handle(ctx context.Context, c SignalRun) (run.SignalResult, error) {
	res, err := h.engine.Signal(ctx, c.OrganizationID, c.RunID, c.Name, c.Payload)
	if err != nil && !port.IsDomain(err) {
		if pgdb.Unavailable(err) {
			return run.SignalResult{}, port.StoreError(err)
		}
		return run.SignalResult{}, errors.Join(errors.New("signal"), err)
	}
	return res, err
}
