package app

import (
	"context"
	"encoding/json"
	"errors"
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
	return Runs{reader: reader, engine: engine}
}

// Reader is the read side, for queries.
func (r Runs) Reader() RunReader { return r.reader }

// Cancel cancels a run: its status afterwards, *run.FinishedError, run.ErrNotFound or a
// *CancelError.
func (r Runs) Cancel(ctx context.Context, org, id string) (string, error) {
	st, err := r.engine.Cancel(ctx, org, id)
	if err != nil {
		if isDomain(err) {
			return "", err
		}
		return "", &CancelError{Err: err}
	}
	return string(st), nil
}

// Signal stores a signal for a run and wakes it when a wait consumes it.
func (r Runs) Signal(ctx context.Context, org, id, name string, payload json.RawMessage) (string, bool, error) {
	sid, delivered, err := r.engine.Signal(ctx, org, id, name, payload)
	if err != nil && !isDomain(err) {
		return "", false, errors.Join(errors.New("signal"), err)
	}
	return sid, delivered, err
}
