package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Crash safety (ARCHITECTURE §4). Every replica registers in `replicas` before River starts
// fetching and refreshes its heartbeat every Config.Heartbeat; one whose heartbeat (database
// clock) is older than Config.DeadAfter, or that has no row at all, is dead. Every replica
// runs a sweeper every Config.SweepEvery, serialized by a transaction-level advisory lock: it
// finds runs that a dead replica holds (a running attempt that is not parked in a wait, or a
// running River job it fetched last) and, under the run's row lock, marks those attempts
// `lost`, puts their blocks back to pending, finalizes the dead replica's River job and
// inserts a fresh one in the same commit, so the run continues on a live replica at once.
//
// River's own rescuer never touches these jobs: the worker's Timeout is -1 (no job timeout),
// and River's rescuer ignores running jobs without a timeout whatever RescueStuckJobsAfter
// says (maintenance/job_rescuer.go, makeRetryDecision). So there is one recovery path, ours.
//
// Fencing: a replica that was declared dead but still runs (a long pause, a partition) must
// not apply anything. Every write the worker makes checks, under the run's row lock, that its
// River job is still `running`; the sweeper finalizes that job under the same lock, so a
// zombie's result is dropped and a live replica never runs the same attempt twice.

// Defaults of the crash-safety settings.
const (
	DefaultHeartbeat = time.Second
	DefaultDeadAfter = 5 * time.Second
)

// lostCode is the error code of attempts a crashed replica lost.
const lostCode = "lost"

// forgetReplicasAfter is how long a dead replica's row stays for inspection.
const forgetReplicasAfter = time.Hour

func (e *Engine) heartbeat(ctx context.Context) error {
	host, _ := os.Hostname()
	_, err := e.pool.Exec(ctx, `INSERT INTO replicas (id, host, pid) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`, e.cfg.Replica, host, os.Getpid())
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// deregister removes the replica's row: whatever it still holds is swept at once.
func (e *Engine) deregister(ctx context.Context) error {
	_, err := e.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, e.cfg.Replica)
	return err
}

// background runs the heartbeat and the sweeper until ctx ends.
func (e *Engine) background(ctx context.Context) {
	beat := time.NewTicker(e.cfg.Heartbeat)
	defer beat.Stop()
	sweep := time.NewTicker(e.cfg.SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if err := e.heartbeat(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("replica heartbeat failed", "replica", e.cfg.Replica, "err", err)
			}
		case <-sweep.C:
			if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("sweep of dead replicas failed", "err", err)
			}
		}
	}
}

// Sweep recovers the runs dead replicas hold and returns how many attempts it marked lost.
// Replicas call it every SweepEvery; only one sweeps at a time (the others skip the round).
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	lost := 0
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, pgdb.LockID("orchestrator:sweep")).Scan(&got); err != nil {
			return fmt.Errorf("sweep lock: %w", err)
		}
		if !got {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT id FROM replicas WHERE heartbeat_at > now() - $1::interval`, e.cfg.DeadAfter.String())
		if err != nil {
			return fmt.Errorf("live replicas: %w", err)
		}
		live, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if live == nil {
			live = []string{} // NULL would make "<> ALL" match nothing
		}
		rows, err = tx.Query(ctx, `SELECT a.run_id FROM step_attempts a
			WHERE a.status = 'running' AND a.replica <> ALL($1)
			  AND NOT EXISTS (SELECT 1 FROM waits w WHERE w.attempt_id = a.id)
			UNION
			SELECT j.args->>'run_id' FROM river_job j
			WHERE j.state = 'running' AND j.kind = $2 AND j.attempted_by[array_upper(j.attempted_by, 1)] <> ALL($1)
			LIMIT 1000`, live, run.Spec)
		if err != nil {
			return fmt.Errorf("find dead work: %w", err)
		}
		runIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range runIDs {
			n, err := e.recover(ctx, tx, id, live)
			if err != nil {
				return err
			}
			lost += n
		}
		if len(runIDs) == 0 {
			_, err = tx.Exec(ctx, `DELETE FROM replicas WHERE heartbeat_at < now() - $1::interval`, forgetReplicasAfter.String())
		}
		return err
	})
	return lost, err
}

// recover hands one run held by dead replicas back: their attempts in flight become lost,
// their blocks pending, their jobs finalized, and a fresh job continues the run.
func (e *Engine) recover(ctx context.Context, tx pgx.Tx, runID string, live []string) (int, error) {
	// A run locked by a live worker right now is looked at again in the next round.
	var locked string
	err := tx.QueryRow(ctx, `SELECT id FROM runs WHERE id = $1 FOR UPDATE SKIP LOCKED`, runID).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lock run %s: %w", runID, err)
	}
	l, err := e.lockRun(ctx, tx, runID)
	if err != nil {
		return 0, err
	}
	// The dead replicas' jobs of this run: finalized here, so their workers (should they still
	// be alive) are fenced off.
	rows, err := tx.Query(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now(),
			errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt,
				'error', 'replica ' || attempted_by[array_upper(attempted_by, 1)] || ' stopped heartbeating', 'trace', ''))
		WHERE kind = $1 AND args @> jsonb_build_object('run_id', $2::text) AND state = 'running' AND attempted_by[array_upper(attempted_by, 1)] <> ALL($3)
		RETURNING id`, run.Spec, runID, live)
	if err != nil {
		return 0, fmt.Errorf("finalize dead jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, err
	}
	if l.broken != nil {
		return 0, e.failBroken(ctx, tx, l, l.broken)
	}
	// Running attempts of dead replicas that are not parked in a wait.
	type lostAttempt struct{ id, block, replica string }
	rows, err = tx.Query(ctx, `SELECT a.id, a.block_id, a.replica FROM step_attempts a
		WHERE a.run_id = $1 AND a.status = 'running' AND a.replica <> ALL($2)
		  AND NOT EXISTS (SELECT 1 FROM waits w WHERE w.attempt_id = a.id)
		ORDER BY a.seq`, runID, live)
	if err != nil {
		return 0, fmt.Errorf("find lost attempts: %w", err)
	}
	attempts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lostAttempt, error) {
		var a lostAttempt
		return a, r.Scan(&a.id, &a.block, &a.replica)
	})
	if err != nil {
		return 0, err
	}
	var stopped string // a block that reached the cap of attempts of any kind
	for _, a := range attempts {
		bs := l.state.Block(a.block)
		bs.Lost++
		if bs.Status == run.BlockRunning {
			bs.Status = run.BlockPending
			if bs.Attempts >= maxAttemptsAnyKind && !l.status.Terminal() {
				bs.Status, stopped = run.BlockFailed, a.block
			}
		}
		if err := e.endAttempt(ctx, tx, l, a.id, "lost", nil,
			map[string]any{"message": "replica " + a.replica + " stopped heartbeating", "code": lostCode}); err != nil {
			return 0, err
		}
		e.log.Warn("attempt lost", "run_id", runID, "block_id", a.block, "attempt_id", a.id, "replica", a.replica)
	}
	// Blocks between retries (the last attempt failed, the backoff was running on a dead
	// replica) hold no running attempt; their dead job was finalized above, so they go back
	// to pending too. Only blocks whose latest attempt ran on a dead replica are touched.
	if len(jobs) > 0 {
		for id, bs := range l.state.Blocks {
			if bs.Status != run.BlockRunning {
				continue
			}
			var replica, status string
			err := tx.QueryRow(ctx, `SELECT replica, status FROM step_attempts WHERE run_id = $1 AND block_id = $2 ORDER BY attempt DESC LIMIT 1`,
				runID, id).Scan(&replica, &status)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return 0, fmt.Errorf("latest attempt of %s: %w", id, err)
			}
			if err == nil && status == "failed" && !contains(live, replica) {
				bs.Status = run.BlockPending
			}
		}
	}
	if len(attempts) == 0 && len(jobs) == 0 {
		return 0, nil // someone else moved it meanwhile
	}
	switch {
	case l.status.Terminal():
		if _, err := e.save(ctx, tx, l); err != nil {
			return 0, err
		}
	case stopped != "":
		msg := fmt.Sprintf("step stopped after %d attempts (the last was lost: its replica stopped heartbeating)", maxAttemptsAnyKind)
		if err := e.finish(ctx, tx, l, run.StatusFailed, map[string]any{"block_id": stopped, "message": msg}); err != nil {
			return 0, err
		}
	default:
		l.status = run.StatusRunning
		if _, err := e.save(ctx, tx, l); err != nil {
			return 0, err
		}
		if _, err := e.river.InsertTx(ctx, tx, e.args(ctx, runID), nil); err != nil {
			return 0, fmt.Errorf("insert job: %w", err)
		}
	}
	e.log.Info("run recovered from a dead replica", "run_id", runID, "lost_attempts", len(attempts), "jobs_finalized", len(jobs))
	return len(attempts), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fenced reports whether the job may still write: it is still running in River's table. Call
// it under the run's row lock; the sweeper finalizes a dead replica's job under the same lock.
func fenced(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs]) (bool, error) {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, job.ID).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("job state: %w", err)
	}
	return state != string(rivertype.JobStateRunning), nil
}

// handBack gives the run back to the queue while this replica stops: the block between
// retries goes back to pending, a fresh job (scheduled at the end of the backoff, if any)
// continues the run elsewhere, and this job completes, all in one commit.
func (e *Engine) handBack(ctx context.Context, job *river.Job[runArgs], blockID string, at time.Time) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		l, err := e.lockRun(ctx, tx, job.Args.RunID)
		if errors.Is(err, run.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if gone, err := fenced(ctx, tx, job); err != nil || gone {
			return err
		}
		if l.broken != nil {
			if err := e.failBroken(ctx, tx, l, l.broken); err != nil {
				return err
			}
			return e.complete(ctx, tx, job)
		}
		if !l.status.Terminal() {
			if blockID != "" {
				if bs := l.state.Block(blockID); bs.Status == run.BlockRunning {
					bs.Status = run.BlockPending
				}
				if _, err := e.save(ctx, tx, l); err != nil {
					return err
				}
			}
			opts := &river.InsertOpts{}
			if !at.IsZero() {
				opts.ScheduledAt = at
			}
			if _, err := e.river.InsertTx(ctx, tx, e.args(ctx, l.id), opts); err != nil {
				return fmt.Errorf("insert job: %w", err)
			}
		}
		return e.complete(ctx, tx, job)
	})
}
