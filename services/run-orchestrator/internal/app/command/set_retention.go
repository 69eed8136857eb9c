package command

import (
	"context"
	"time"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// SetRetention sets (Period non-nil) or removes (nil) an organization's own retention period.
type SetRetention struct {
	OrganizationID string
	// MayChange says the caller is an owner or admin of the organization, or an API key of it
	// (only they can create one).
	MayChange bool
	Period    *string
}

// SetRetentionHandler stores organizations' periods.
type SetRetentionHandler struct {
	store  port.RetentionStore
	server time.Duration
}

// NewSetRetentionHandler returns the handler; server is SVC_RUN_RETENTION, the longest period
// an organization may choose.
func NewSetRetentionHandler(store port.RetentionStore, server time.Duration) SetRetentionHandler {
	if store == nil {
		panic("nil store")
	}
	return SetRetentionHandler{store: store, server: server}
}

// Handle checks the caller and the period, stores it and returns the organization's
// retention: run.ErrForbidden, a *run.InvalidRetentionError or an *UnavailableError.
func (h SetRetentionHandler) Handle(ctx context.Context, c SetRetention) (run.Retention, error) {
	if !c.MayChange {
		return run.Retention{}, run.ErrForbidden
	}
	var d time.Duration
	if c.Period != nil {
		var err error
		if d, err = run.ParseRetention(*c.Period, h.server); err != nil {
			return run.Retention{}, err
		}
	}
	at, err := h.store.SetOverride(ctx, c.OrganizationID, d)
	if err != nil {
		return run.Retention{}, port.StoreError(err)
	}
	return run.Retention{OrganizationID: c.OrganizationID, Override: d, Server: h.server, UpdatedAt: at}, nil
}
