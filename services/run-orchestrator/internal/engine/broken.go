package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Runs the engine cannot drive. A run must never be left neither finished nor cancellable:
// when its stored definition, state or input cannot be read, or its job keeps failing, the
// run is failed with an attempt that says why (code brokenCode), in one commit.

// brokenCode is the error code of the attempt that records why a run could not go on.
const brokenCode = "run_unreadable"

// brokenRunError is a stored run that cannot be read: retrying its job cannot help.
type brokenRunError struct{ err error }

func (e *brokenRunError) Error() string { return "run cannot be read: " + e.err.Error() }
func (e *brokenRunError) Unwrap() error { return e.err }

// jobRetryDelay is the pause before try attempt+1 of a run's job.
func jobRetryDelay(attempt int) time.Duration {
	d := time.Second << min(max(attempt-1, 0), 6)
	return min(d, time.Minute)
}

// driveSafely is drive with a panic turned into the job's error.
func (e *Engine) driveSafely(ctx context.Context, job *river.Job[runArgs]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("run job panicked", "run_id", job.Args.RunID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("engine panic: %v", p)
		}
	}()
	return e.drive(ctx, job)
}

// failJob fails the run of job with cause and completes the job, unless the job no longer
// holds the run (another replica's sweeper took it over) or the run has already ended.
func (e *Engine) failJob(ctx context.Context, job *river.Job[runArgs], cause error) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		l, err := e.lockRun(ctx, tx, job.Args.RunID)
		if errors.Is(err, run.ErrNotFound) {
			return e.complete(ctx, tx, job)
		}
		if err != nil {
			return err
		}
		if gone, err := fenced(ctx, tx, job); err != nil || gone {
			return err
		}
		if err := e.failBroken(ctx, tx, l, cause); err != nil {
			return err
		}
		return e.complete(ctx, tx, job)
	})
}

// failBroken ends a run that cannot go on: attempts still running fail, one more failed
// attempt (on the trigger block, whose step is where the run starts) carries the reason, and
// the run fails with it. A terminal run is left as it is.
func (e *Engine) failBroken(ctx context.Context, tx pgx.Tx, l *loaded, cause error) error {
	if l.status.Terminal() {
		return nil
	}
	msg := readable(cause)
	errBody := map[string]any{"message": msg, "code": brokenCode}
	running, err := runningAttempts(ctx, tx, l.id, "")
	if err != nil {
		return err
	}
	for _, a := range running {
		if err := e.endAttempt(ctx, tx, l, a, "failed", nil, errBody); err != nil {
			return err
		}
	}
	blockID, typ := "", run.Spec
	for _, b := range l.def.Blocks {
		if strings.HasPrefix(b.Type, "trigger.") {
			blockID, typ = b.ID, b.Type
			break
		}
	}
	errJSON, _ := json.Marshal(errBody)
	if err := l.exec(ctx, tx, `INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, replica, seq, started_at, finished_at, error)
		VALUES ($1, $2, $3, $4, (SELECT coalesce(max(attempt), 0) + 1 FROM step_attempts WHERE run_id = $2 AND block_id = $3),
			'failed', $5, $6, now(), now(), $7)`,
		wire.NewID(wire.Attempt), l.id, blockID, typ, e.cfg.Replica, l.nextSeq(), string(errJSON)); err != nil {
		return fmt.Errorf("insert attempt: %w", err)
	}
	for _, bs := range l.state.Blocks {
		if bs.Status == run.BlockRunning || bs.Status == run.BlockWaiting {
			bs.Status = run.BlockFailed
		}
	}
	e.log.Error("run failed: the engine cannot go on with it", "run_id", l.id, "err", cause)
	return e.finish(ctx, tx, l, run.StatusFailed, map[string]any{"block_id": blockID, "message": msg})
}

// inputError says why a stored input cannot be read, in the JSON boundary's words where it
// breaks one of its rules (a run stored before the boundary existed).
func inputError(raw []byte, err error) error {
	if e := wire.CheckJSON(raw); e != nil {
		return fmt.Errorf("run input at %q: %s", e.Pointer, e.Message)
	}
	return fmt.Errorf("run input: %w", err)
}

// reclaim is a job's later try taking back the blocks its earlier try held: that try ended
// mid-step (its transaction failed: Postgres restarted, the connection was cut) with the
// block still running, and no one else would ever move it on (the sweeper only takes the
// work of dead replicas, and this one is alive). The attempt in flight is recorded lost, as a
// dead replica's is (its connector may have run), and the block goes back to pending; one
// that reached the cap of attempts of any kind fails the run. The caller saves the run.
func (e *Engine) reclaim(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs], l *loaded) error {
	var stopped string
	for id, bs := range l.state.Blocks {
		if bs.Status != run.BlockRunning || bs.Job != job.ID {
			continue
		}
		attempts, err := runningAttempts(ctx, tx, l.id, id)
		if err != nil {
			return err
		}
		for _, a := range attempts {
			bs.Lost++
			if err := e.endAttempt(ctx, tx, l, a, "lost", nil, map[string]any{"code": lostCode,
				"message": fmt.Sprintf("the try of job %d that ran this attempt failed before recording its result (try %d of the job took the block back)", job.ID, job.Attempt)}); err != nil {
				return err
			}
			e.log.Warn("attempt lost: its job's try failed mid-step", "run_id", l.id, "block_id", id, "attempt_id", a, "job_id", job.ID)
		}
		bs.Status = run.BlockPending
		if bs.Attempts >= maxAttemptsAnyKind {
			bs.Status, stopped = run.BlockFailed, id
		}
	}
	if stopped != "" {
		msg := fmt.Sprintf("step stopped after %d attempts (the last was lost: its job's try failed mid-step)", maxAttemptsAnyKind)
		return e.finish(ctx, tx, l, run.StatusFailed, map[string]any{"block_id": stopped, "message": msg})
	}
	return nil
}

// runningAttempts are the ids of a run's attempts still running: of one block, or of every
// block when blockID is "".
func runningAttempts(ctx context.Context, tx pgx.Tx, runID, blockID string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM step_attempts WHERE run_id = $1 AND status = 'running' AND ($2 = '' OR block_id = $2)`, runID, blockID)
	if err != nil {
		return nil, fmt.Errorf("running attempts of %s: %w", runID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("running attempts of %s: %w", runID, err)
	}
	return ids, nil
}

// readable is the message a run's reader gets for cause.
func readable(cause error) string {
	var broken *brokenRunError
	if errors.As(cause, &broken) {
		cause = broken.err
	}
	return "the run cannot go on: " + cause.Error()
}
