package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Events from outside a run's jobs: a signal, a cancel, a wait's timer. Each is one
// transaction on the run through update, applying one event.

// owned fails with run.ErrNotFound for another organization's run.
func owned(l *locked, org string) error {
	if l.run.OrganizationID != org {
		return run.ErrNotFound
	}
	return nil
}

// Signal stores a signal; the oldest wait on its name consumes it at once and the run wakes.
func (e *Engine) Signal(ctx context.Context, org, runID, name string, payload json.RawMessage) (string, bool, error) {
	sigID := wire.NewID(wire.Signal)
	o, err := e.update(ctx, runID, nil, newRunCache(), func(ctx context.Context, tx pgx.Tx, l *locked) (run.Outcome, error) {
		if err := owned(l, org); err != nil {
			return run.Outcome{}, err
		}
		if l.status.Terminal() {
			return run.Outcome{}, &run.FinishedError{Status: l.status}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO signals (id, run_id, name, payload) VALUES ($1, $2, $3, $4)`, sigID, runID, name, jsonText(payload)); err != nil {
			return run.Outcome{}, fmt.Errorf("insert signal: %w", err)
		}
		if l.broken != nil {
			// Stored, but a run that cannot be read never advances: it fails here (it may be
			// parked in a wait, with no worker that would find out).
			return e.failBroken(ctx, tx, l, l.broken, run.StatusFailed)
		}
		return e.interp.Apply(l.run, run.SignalArrived{Signal: run.Signal{ID: sigID, Name: name, Payload: payload}, Now: time.Now()})
	})
	if err != nil {
		return "", false, err
	}
	return sigID, o.Delivered, nil
}

// Cancel marks the run cancelled, ends its waits, cancels its jobs and the attempts in flight
// (a worker of this replica running one has its context cancelled at once).
func (e *Engine) Cancel(ctx context.Context, org, runID string) (run.Status, error) {
	_, err := e.update(ctx, runID, nil, newRunCache(), func(ctx context.Context, tx pgx.Tx, l *locked) (run.Outcome, error) {
		if err := owned(l, org); err != nil {
			return run.Outcome{}, err
		}
		if l.broken != nil && !l.status.Terminal() {
			return e.failBroken(ctx, tx, l, errors.New("run cancelled"), run.StatusCancelled)
		}
		return e.interp.Apply(l.run, run.CancelRequested{Now: time.Now()})
	})
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	for _, c := range e.running[runID] {
		c(errors.New("run cancelled"))
	}
	e.mu.Unlock()
	return run.StatusCancelled, nil
}

// cancelJobs cancels every job of the run that has not finished.
func (e *Engine) cancelJobs(ctx context.Context, tx pgx.Tx, runID string) error {
	// args @> uses River's GIN index on args (args->>'run_id' would read the whole table).
	rows, err := tx.Query(ctx, `SELECT id FROM river_job WHERE kind = $1 AND args @> jsonb_build_object('run_id', $2::text)
		AND state NOT IN ('completed', 'cancelled', 'discarded')`, run.Spec, runID)
	if err != nil {
		return fmt.Errorf("find jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if _, err := e.river.JobCancelTx(ctx, tx, j); err != nil && !errors.Is(err, river.ErrNotFound) {
			return fmt.Errorf("cancel job %d: %w", j, err)
		}
	}
	return nil
}

// wake is a timer's end: a sleep is over, or a signal wait timed out. Every replica arms the
// timers of every wait due soon; the first to lock the run releases the wait, the others find
// it released.
func (e *Engine) wake(ctx context.Context, runID, blockID string) error {
	_, err := e.update(ctx, runID, nil, newRunCache(), func(ctx context.Context, tx pgx.Tx, l *locked) (run.Outcome, error) {
		if l.status.Terminal() {
			return run.Outcome{}, nil
		}
		if l.broken != nil {
			return e.failBroken(ctx, tx, l, l.broken, run.StatusFailed)
		}
		return e.interp.Apply(l.run, run.TimerFired{Block: blockID, Now: time.Now()})
	})
	if errors.Is(err, run.ErrNotFound) {
		return nil
	}
	return err
}
