package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// forgetReplicasAfter is how long a dead replica's row stays for inspection.
const forgetReplicasAfter = time.Hour

// Sweep recovers the runs that replicas without a heartbeat for deadAfter hold, each as decide
// says, and returns how many attempts it marked lost. Every replica calls it every SweepEvery;
// only one sweeps at a time (the others skip the round).
func (s *RunStore) Sweep(ctx context.Context, deadAfter time.Duration, decide engine.LostFunc) (int, error) {
	lost := 0
	var (
		done     []sweptRun
		admitted []run.Change
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		lost, done, admitted = 0, nil, nil
		// The runs the sweep ends, by concurrency group: their groups admit their next runs
		// once every run is recovered, all group locks taken in order (concurrency.go).
		ending := map[group][]string{}
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, pgdb.LockID("orchestrator:sweep")).Scan(&got); err != nil {
			return fmt.Errorf("sweep lock: %w", err)
		}
		if !got {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT id FROM replicas WHERE heartbeat_at > now() - $1::interval`, deadAfter.String())
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
			n, o, g, err := s.recover(ctx, tx, id, live, decide)
			if err != nil {
				return err
			}
			lost += n
			done = append(done, sweptRun{id, o})
			if g != nil {
				ending[*g] = append(ending[*g], id)
			}
		}
		if admitted, err = s.sweepGroups(ctx, tx, ending); err != nil {
			return err
		}
		if len(runIDs) == 0 {
			_, err = tx.Exec(ctx, `DELETE FROM replicas WHERE heartbeat_at < now() - $1::interval`, forgetReplicasAfter.String())
		}
		return err
	})
	if err == nil {
		for _, d := range done {
			s.after(d.runID, &d.outcome)
		}
		if len(admitted) > 0 {
			s.events.Publish(admitted)
		}
	}
	return lost, err
}

type sweptRun struct {
	runID   string
	outcome run.Outcome
}

// recover hands one run held by dead replicas back: their attempts in flight become lost,
// their blocks pending, their jobs finalized, and a fresh job continues the run. When that
// ends the run and the run held a slot of its concurrency group, the group is returned (its
// next runs are admitted by the caller).
func (s *RunStore) recover(ctx context.Context, tx pgx.Tx, runID string, live []string, decide engine.LostFunc) (int, run.Outcome, *group, error) {
	n, o, l, err := s.recoverRun(ctx, tx, runID, live, decide)
	if err != nil || l == nil || l.group == nil || !l.admitted || l.status.Terminal() || !ends(&o) {
		return n, o, nil, err
	}
	return n, o, l.group, nil
}

// recoverRun is recover's work; l is the run as locked (nil when it was not).
func (s *RunStore) recoverRun(ctx context.Context, tx pgx.Tx, runID string, live []string, decide engine.LostFunc) (int, run.Outcome, *Locked, error) {
	var none run.Outcome
	// A run locked by a live worker right now is looked at again in the next round.
	var skip string
	err := tx.QueryRow(ctx, `SELECT id FROM runs WHERE id = $1 FOR UPDATE SKIP LOCKED`, runID).Scan(&skip)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, none, nil, nil
	}
	if err != nil {
		return 0, none, nil, fmt.Errorf("lock run %s: %w", runID, err)
	}
	l, err := lockRun(ctx, tx, runID)
	if err != nil {
		return 0, none, nil, err
	}
	// The dead replicas' jobs of this run: finalized here, so their workers (should they still
	// be alive) are fenced off.
	rows, err := tx.Query(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now(),
			errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt,
				'error', 'replica ' || attempted_by[array_upper(attempted_by, 1)] || ' stopped heartbeating', 'trace', ''))
		WHERE kind = $1 AND args @> jsonb_build_object('run_id', $2::text) AND state = 'running' AND attempted_by[array_upper(attempted_by, 1)] <> ALL($3)
		RETURNING id`, run.Spec, runID, live)
	if err != nil {
		return 0, none, nil, fmt.Errorf("finalize dead jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, none, nil, err
	}
	if l.broken != nil {
		o, err := s.failBroken(ctx, tx, l, l.broken, run.StatusFailed)
		return 0, o, l, err
	}
	// Running attempts of dead replicas that are not parked in a wait.
	rows, err = tx.Query(ctx, `SELECT a.block_id, a.id, a.replica FROM step_attempts a
		WHERE a.run_id = $1 AND a.status = 'running' AND a.replica <> ALL($2)
		  AND NOT EXISTS (SELECT 1 FROM waits w WHERE w.attempt_id = a.id)
		ORDER BY a.seq`, runID, live)
	if err != nil {
		return 0, none, nil, fmt.Errorf("find lost attempts: %w", err)
	}
	attempts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (run.LostAttempt, error) {
		var a run.LostAttempt
		return a, r.Scan(&a.Block, &a.AttemptID, &a.Replica)
	})
	if err != nil {
		return 0, none, nil, err
	}
	if len(attempts) == 0 && len(jobs) == 0 {
		return 0, none, nil, nil // someone else moved it meanwhile
	}
	for _, a := range attempts {
		s.log.Warn("attempt lost", "run_id", runID, "block_id", a.Block, "attempt_id", a.AttemptID, "replica", a.Replica)
	}
	o, err := decide(l.run, attempts, jobs)
	if err != nil {
		return 0, none, nil, err
	}
	if err := s.writeNow(ctx, tx, l, &o); err != nil {
		return 0, none, nil, err
	}
	s.log.Info("run recovered from a dead replica", "run_id", runID, "lost_attempts", len(attempts), "jobs_finalized", len(jobs))
	return len(attempts), o, l, nil
}

// writeNow makes o's writes in tx at once (a transaction that is not a job's: the sweeper's).
func (s *RunStore) writeNow(ctx context.Context, tx pgx.Tx, l *Locked, o *run.Outcome) error {
	b := &pgx.Batch{}
	if _, err := s.queueWrites(b, l, o); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write run %s: %w", l.run.ID, err)
	}
	return s.jobWrites(ctx, tx, l.run, o)
}
