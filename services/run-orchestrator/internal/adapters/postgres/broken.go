package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Runs the engine cannot drive. A run must never be left neither finished nor cancellable:
// when its stored definition, state or input cannot be read, or its job keeps failing, the
// run is failed with an attempt that says why (code brokenCode), in one commit.

// brokenCode is the error code of the attempt that records why a run could not go on.
const brokenCode = "run_unreadable"

// FailJob fails the run of job with cause and completes the job, unless the job no longer
// holds the run (another replica's sweeper took it over) or the run has already ended.
func (s *RunStore) FailJob(ctx context.Context, job *engine.Job, cause error) (run.Outcome, error) {
	o, err := s.update(ctx, job.RunID, job, NewCache(), func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
		o, err := s.failBroken(ctx, tx, l, cause, run.StatusFailed)
		o.CompleteJob = true
		return o, err
	})
	if errors.Is(err, run.ErrNotFound) {
		return run.Outcome{}, s.CompleteJob(ctx, job)
	}
	return o, err
}

// failBroken ends a run that cannot go on, in SQL of its own (the interpreter cannot read the
// run): attempts still running end, one more failed attempt (on the trigger block, where the
// run starts) carries the reason, and the run ends failed with it, or cancelled when a cancel
// is what ends it. A terminal run is left as it is. The outcome holds the changes to publish.
func (s *RunStore) failBroken(ctx context.Context, tx pgx.Tx, l *Locked, cause error, status run.Status) (run.Outcome, error) {
	var o run.Outcome
	if l.status.Terminal() {
		return o, nil
	}
	r := l.run
	now := time.Now()
	change := func(c run.Change) {
		c.RunID, c.OrganizationID, c.WorkflowID, c.At = r.ID, r.OrganizationID, r.WorkflowID, now
		o.Changes = append(o.Changes, c)
	}
	msg := readable(cause)
	errBody := map[string]any{"message": msg, "code": brokenCode}
	if status == run.StatusCancelled {
		errBody = map[string]any{"message": "run cancelled"}
	}
	errJSON, _ := json.Marshal(errBody)
	seq := l.seq
	running, err := runningAttempts(ctx, tx, r.ID, "")
	if err != nil {
		return o, err
	}
	attemptStatus := "failed"
	if status == run.StatusCancelled {
		attemptStatus = "cancelled"
	}
	for _, a := range running {
		seq++
		if _, err := tx.Exec(ctx, `UPDATE step_attempts SET status = $2, error = $3, seq = $4, finished_at = now() WHERE id = $1`,
			a, attemptStatus, string(errJSON), seq); err != nil {
			return o, fmt.Errorf("end attempt: %w", err)
		}
		change(run.Change{Kind: run.ChangeAttemptFinished, Seq: seq, AttemptID: a, AttemptStatus: attemptStatus, Error: errJSON})
	}
	var runErr *string
	if status == run.StatusFailed {
		blockID, typ := "", run.Spec
		for _, b := range r.Def.Blocks {
			if strings.HasPrefix(b.Type, "trigger.") {
				blockID, typ = b.ID, b.Type
				break
			}
		}
		seq++
		id := wire.NewID(wire.Attempt)
		if _, err := tx.Exec(ctx, `INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, replica, seq, started_at, finished_at, error)
			VALUES ($1, $2, $3, $4, (SELECT coalesce(max(attempt), 0) + 1 FROM step_attempts WHERE run_id = $2 AND block_id = $3),
				'failed', $5, $6, now(), now(), $7)`,
			id, r.ID, blockID, typ, s.replica, seq, string(errJSON)); err != nil {
			return o, fmt.Errorf("insert attempt: %w", err)
		}
		change(run.Change{Kind: run.ChangeAttemptFinished, Seq: seq, BlockID: blockID, AttemptID: id, AttemptStatus: "failed", Error: errJSON})
		b, _ := json.Marshal(map[string]any{"block_id": blockID, "message": msg})
		runErr = jsonText(b)
		s.log.Error("run failed: the engine cannot go on with it", "run_id", r.ID, "err", cause)
	}
	seq++ // the status change's own sequence (the status log's)
	if _, err := tx.Exec(ctx, `INSERT INTO run_statuses (run_id, seq, status, at) VALUES ($1, $2, $3, now())`, r.ID, seq, string(status)); err != nil {
		return o, fmt.Errorf("log status: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE runs SET status = $2, change_seq = $3, error = $4, updated_at = now(), finished_at = now(),
		started_at = coalesce(started_at, now()) WHERE id = $1`, r.ID, string(status), seq, runErr); err != nil {
		return o, fmt.Errorf("finish run: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM waits WHERE run_id = $1`, r.ID); err != nil {
		return o, fmt.Errorf("delete waits: %w", err)
	}
	change(run.Change{Kind: run.ChangeStatus, Seq: seq, Status: status})
	o.CancelJobs = status == run.StatusCancelled
	return o, nil
}

// inputError says why a stored input cannot be read, in the JSON boundary's words where it
// breaks one of its rules (a run stored before the boundary existed).
func inputError(raw []byte, err error) error {
	if e := wire.CheckJSON(raw); e != nil {
		return fmt.Errorf("run input at %q: %s", e.Pointer, e.Message)
	}
	return fmt.Errorf("run input: %w", err)
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
	var broken *engine.BrokenRunError
	if errors.As(cause, &broken) {
		cause = broken.Err
	}
	return "the run cannot go on: " + cause.Error()
}
