package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Events from outside a run's jobs: a start, a signal, a cancel, a wait's timer, the sweep of
// a dead replica's runs. Each is one transaction on the run applying one event.

// DispatchMany stores new runs, their idempotency records and their first jobs (app.Engine).
// Runs that may end at their dispatch are run first (finishAtDispatch), before the
// transaction begins, and stored as they ended if they are stored at all.
func (e *Engine) DispatchMany(ctx context.Context, runs []run.NewRun, keys []string) ([]string, error) {
	ended := make([]*Ended, len(runs))
	dones := make([]func(committed bool), len(runs))
	for i, nr := range runs {
		ended[i], dones[i] = e.finishAtDispatch(ctx, nr)
	}
	ids, err := e.runs.DispatchMany(ctx, runs, keys, ended)
	for i, done := range dones {
		if done != nil {
			// Not stored when its key was taken or the transaction failed.
			stored := err == nil && ids[i] == runs[i].ID
			done(stored)
			if stored {
				e.metrics.committed(ctx, ended[i].Run, &ended[i].Outcome)
			}
		}
	}
	return ids, err
}

// RunsForKeys returns, per (orgs[i], keys[i]), the run the unexpired key names, or "".
func (e *Engine) RunsForKeys(ctx context.Context, orgs, keys []string) ([]string, error) {
	return e.runs.RunsForKeys(ctx, orgs, keys)
}

// owned fails with run.ErrNotFound for another organization's run.
func owned(tx RunTx, org string) error {
	if tx.Run().OrganizationID != org {
		return run.ErrNotFound
	}
	return nil
}

// Signal stores a signal; the oldest wait on its name consumes it at once and the run wakes.
// A signal no wait consumed says what the run waits for.
func (e *Engine) Signal(ctx context.Context, org, runID, name string, payload json.RawMessage) (run.SignalResult, error) {
	res := run.SignalResult{ID: wire.NewID(wire.Signal)}
	o, err := e.update(ctx, runID, nil, func(ctx context.Context, tx RunTx) (run.Outcome, error) {
		if err := owned(tx, org); err != nil {
			return run.Outcome{}, err
		}
		if tx.Status().Terminal() {
			return run.Outcome{}, &run.FinishedError{Status: tx.Status()}
		}
		if err := tx.StoreSignal(ctx, res.ID, name, payload); err != nil {
			return run.Outcome{}, err
		}
		if broken := tx.Broken(); broken != nil {
			// Stored, but a run that cannot be read never advances: it fails here (it may be
			// parked in a wait, with no worker that would find out).
			return tx.Fail(ctx, broken, run.StatusFailed)
		}
		r := tx.Run()
		o, err := e.interp.Apply(r, run.SignalArrived{Signal: run.Signal{ID: res.ID, Name: name, Payload: payload}, Now: time.Now()})
		if err == nil && !o.Delivered {
			res.WaitingFor = r.SignalWaits()
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
// flight cancelled, then cancels the context of a step of it this replica runs.
func (e *Engine) Cancel(ctx context.Context, org, runID string) (run.Status, error) {
	_, err := e.update(ctx, runID, nil, func(ctx context.Context, tx RunTx) (run.Outcome, error) {
		if err := owned(tx, org); err != nil {
			return run.Outcome{}, err
		}
		if tx.Broken() != nil && !tx.Status().Terminal() {
			return tx.Fail(ctx, errors.New("run cancelled"), run.StatusCancelled)
		}
		return e.interp.Apply(tx.Run(), run.CancelRequested{Now: time.Now()})
	})
	if err != nil {
		return "", err
	}
	e.CancelLocal(runID)
	return run.StatusCancelled, nil
}

// Wake is a timer's end: a sleep is over, or a signal wait timed out. Every replica arms the
// timers of every wait due soon; the first to lock the run releases the wait, the others find
// it released.
//
// The wake that releases the wait records how late it came after the wait's due time
// (svc_timer_lateness_seconds); the replicas that find it released record nothing.
func (e *Engine) Wake(ctx context.Context, runID, blockID string) error {
	var due time.Time
	o, err := e.update(ctx, runID, nil, func(ctx context.Context, tx RunTx) (run.Outcome, error) {
		if tx.Status().Terminal() {
			return run.Outcome{}, nil
		}
		if broken := tx.Broken(); broken != nil {
			return tx.Fail(ctx, broken, run.StatusFailed)
		}
		if bs, ok := tx.Run().State.Blocks[blockID]; ok && bs.Wait != nil {
			due = bs.Wait.WakeAt
		}
		return e.interp.Apply(tx.Run(), run.TimerFired{Block: blockID, Now: time.Now()})
	})
	if errors.Is(err, run.ErrNotFound) {
		return nil
	}
	if err == nil && !due.IsZero() && slices.Contains(o.Released, blockID) {
		e.metrics.woke(ctx, time.Since(due))
	}
	return err
}

// Sweep recovers the runs that replicas without a heartbeat for deadAfter held: their
// attempts in flight are lost, and a fresh job continues each run. It returns how many
// attempts were lost. Every replica calls it; one sweeps at a time.
func (e *Engine) Sweep(ctx context.Context, deadAfter time.Duration) (int, error) {
	type swept struct {
		r *run.Run
		o run.Outcome
	}
	var done []swept
	n, err := e.runs.Sweep(ctx, deadAfter, func(r *run.Run, lost []run.LostAttempt, deadJobs []int64) (run.Outcome, error) {
		o, err := e.interp.Apply(r, run.AttemptsLost{Attempts: lost, DeadJobs: deadJobs, Now: time.Now()})
		if err == nil {
			done = append(done, swept{r, o})
		}
		return o, err
	})
	if err == nil { // one transaction: all of it committed
		for i := range done {
			e.metrics.committed(ctx, done[i].r, &done[i].o)
		}
	}
	return n, err
}
