package query

import (
	"context"
	"time"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Retention reads how long an organization's finished runs are kept.
type Retention struct {
	store  port.RetentionStore
	server time.Duration
}

// NewRetention returns the read over store; server is SVC_RUN_RETENTION.
func NewRetention(store port.RetentionStore, server time.Duration) Retention {
	if store == nil {
		panic("nil store")
	}
	return Retention{store: store, server: server}
}

// Get is org's retention. Any member may read it.
func (q Retention) Get(ctx context.Context, org string) (run.Retention, error) {
	d, at, err := q.store.Override(ctx, org)
	if err != nil {
		return run.Retention{}, port.StoreError(err)
	}
	return run.Retention{OrganizationID: org, Override: d, Server: q.server, UpdatedAt: at}, nil
}
