package app

import (
	"context"
	"encoding/json"
	"errors"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Runs are the read, cancel and signal use cases of the runs API.
type Runs struct {
	reader RunReader
	engine Engine
}

// NewRuns returns the use cases over reader and engine.
func NewRuns(reader RunReader, engine Engine) Runs {
	if reader == nil || engine == nil {
		panic("nil reader or engine")
	}
	return Runs{reader: storeReader{reader}, engine: engine}
}

// Reader is the read side, for queries.
func (r Runs) Reader() RunReader { return r.reader }

// storeReader turns reads that failed because Postgres could not be reached into an
// *UnavailableError (503: clients retry) instead of an internal error.
type storeReader struct{ RunReader }

func (s storeReader) Get(ctx context.Context, org, id string) (run.Record, error) {
	rec, err := s.RunReader.Get(ctx, org, id)
	return rec, storeError(err)
}

func (s storeReader) List(ctx context.Context, org string, f run.ListFilter, maxBytes int64) (RunPage, error) {
	page, err := s.RunReader.List(ctx, org, f, maxBytes)
	return page, storeError(err)
}

func (s storeReader) Logs(ctx context.Context, org, runID string, after int64, limit int, maxBytes int64) ([]run.Attempt, error) {
	items, err := s.RunReader.Logs(ctx, org, runID, after, limit, maxBytes)
	return items, storeError(err)
}

func (s storeReader) WaitingForWorker(ctx context.Context, org, id string) (*run.Queued, error) {
	q, err := s.RunReader.WaitingForWorker(ctx, org, id)
	return q, storeError(err)
}

// storeError is err, or an *UnavailableError when it says the run store cannot be reached.
func storeError(err error) error {
	if err != nil && !isDomain(err) && pgdb.Unavailable(err) {
		return &UnavailableError{Message: "the run store is unavailable", Err: err}
	}
	return err
}

// Cancel cancels a run: its status afterwards, *run.FinishedError, run.ErrNotFound or a
// *CancelError.
func (r Runs) Cancel(ctx context.Context, org, id string) (string, error) {
	st, err := r.engine.Cancel(ctx, org, id)
	if err != nil {
		if isDomain(err) {
			return "", err
		}
		if pgdb.Unavailable(err) {
			return "", storeError(err)
		}
		return "", &CancelError{Err: err}
	}
	return string(st), nil
}

// Signal stores a signal for a run and wakes it when a wait consumes it; one that no wait
// consumed says what the run waits for.
func (r Runs) Signal(ctx context.Context, org, id, name string, payload json.RawMessage) (run.SignalResult, error) {
	res, err := r.engine.Signal(ctx, org, id, name, payload)
	if err != nil && !isDomain(err) {
		if pgdb.Unavailable(err) {
			return run.SignalResult{}, storeError(err)
		}
		return run.SignalResult{}, errors.Join(errors.New("signal"), err)
	}
	return res, err
}
