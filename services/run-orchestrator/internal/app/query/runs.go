package query

import (
	"context"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Runs are the reads of the runs API: a run, its logs, why it waits for a worker, a page of
// runs. A read that failed because Postgres could not be reached is an *UnavailableError
// (503: clients retry) instead of an internal error.
type Runs struct{ reader port.RunReader }

// NewRuns returns the reads over reader.
func NewRuns(reader port.RunReader) Runs {
	if reader == nil {
		panic("nil reader")
	}
	return Runs{reader: reader}
}

// Get reads one run of org.
func (r Runs) Get(ctx context.Context, org, id string) (run.Record, error) {
	rec, err := r.reader.Get(ctx, org, id)
	return rec, port.StoreError(err)
}

// List lists org's runs newest first under f.
func (r Runs) List(ctx context.Context, org string, f run.ListFilter, maxBytes int64) (port.RunPage, error) {
	page, err := r.reader.List(ctx, org, f, maxBytes)
	return page, port.StoreError(err)
}

// Logs lists the run's attempts with seq > after.
func (r Runs) Logs(ctx context.Context, org, runID string, after int64, limit int, maxBytes int64) ([]run.Attempt, error) {
	items, err := r.reader.Logs(ctx, org, runID, after, limit, maxBytes)
	return items, port.StoreError(err)
}

// WaitingForWorker is why the queued run waits for a worker.
func (r Runs) WaitingForWorker(ctx context.Context, org, id string) (*run.Queued, error) {
	q, err := r.reader.WaitingForWorker(ctx, org, id)
	return q, port.StoreError(err)
}
