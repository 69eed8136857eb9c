package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Events from outside a run's jobs: a signal, a cancel, a wait's timer. Each is one
// transaction on the run through update, applying one event.

// owned fails with run.ErrNotFound for another organization's run.
func owned(l *Locked, org string) error {
	if l.run.OrganizationID != org {
		return run.ErrNotFound
	}
	return nil
}

// Signal stores a signal; the oldest wait on its name consumes it at once and the run wakes.
// A signal no wait consumed says what the run waits for.
func (s *Store) Signal(ctx context.Context, org, runID, name string, payload json.RawMessage) (run.SignalResult, error) {
	res := run.SignalResult{ID: wire.NewID(wire.Signal)}
	sigID := res.ID
	o, err := s.update(ctx, runID, nil, NewCache(), func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
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
			return s.failBroken(ctx, tx, l, l.broken, run.StatusFailed)
		}
		o, err := s.interp.Apply(l.run, run.SignalArrived{Signal: run.Signal{ID: sigID, Name: name, Payload: payload}, Now: time.Now()})
		if err == nil && !o.Delivered {
			res.WaitingFor = l.run.SignalWaits()
		}
		return o, err
	})
	if err != nil {
		return run.SignalResult{}, err
	}
	res.Delivered = o.Delivered
	return res, nil
}

// Cancel marks the run cancelled, ends its waits, cancels its jobs and records the attempts in
// flight cancelled (the composition also cancels the context of a worker of this replica that
// runs one).
func (s *Store) Cancel(ctx context.Context, org, runID string) (run.Status, error) {
	_, err := s.update(ctx, runID, nil, NewCache(), func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
		if err := owned(l, org); err != nil {
			return run.Outcome{}, err
		}
		if l.broken != nil && !l.status.Terminal() {
			return s.failBroken(ctx, tx, l, errors.New("run cancelled"), run.StatusCancelled)
		}
		return s.interp.Apply(l.run, run.CancelRequested{Now: time.Now()})
	})
	if err != nil {
		return "", err
	}
	return run.StatusCancelled, nil
}

// Wake is a timer's end: a sleep is over, or a signal wait timed out. Every replica arms the
// timers of every wait due soon; the first to lock the run releases the wait, the others find
// it released.
func (s *Store) Wake(ctx context.Context, runID, blockID string) error {
	_, err := s.update(ctx, runID, nil, NewCache(), func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
		if l.status.Terminal() {
			return run.Outcome{}, nil
		}
		if l.broken != nil {
			return s.failBroken(ctx, tx, l, l.broken, run.StatusFailed)
		}
		return s.interp.Apply(l.run, run.TimerFired{Block: blockID, Now: time.Now()})
	})
	if errors.Is(err, run.ErrNotFound) {
		return nil
	}
	return err
}
