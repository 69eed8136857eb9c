package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Retention keeps the organizations' own retention periods (run_retention) and deletes the
// finished runs past them (0014_run_retention.sql). Deleting a run's row removes its attempts,
// blocks, statuses, waits, signals and idempotency record through the foreign keys' cascades;
// its River jobs are finished ones, which River's cleaner removes minutes after they end.
type Retention struct{ pool *pgxpool.Pool }

// NewRetention returns the store over pool.
func NewRetention(pool *pgxpool.Pool) *Retention {
	if pool == nil {
		panic("nil pool")
	}
	return &Retention{pool: pool}
}

// Override is org's own period, or 0 when it uses the server's.
func (s *Retention) Override(ctx context.Context, org string) (time.Duration, time.Time, error) {
	var secs int64
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT retention_seconds, updated_at FROM run_retention WHERE organization_id = $1`, org).Scan(&secs, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("read retention of %s: %w", org, err)
	}
	return time.Duration(secs) * time.Second, at, nil
}

// SetOverride stores org's period in whole seconds; 0 removes it.
func (s *Retention) SetOverride(ctx context.Context, org string, period time.Duration) (time.Time, error) {
	if period <= 0 {
		if _, err := s.pool.Exec(ctx, `DELETE FROM run_retention WHERE organization_id = $1`, org); err != nil {
			return time.Time{}, fmt.Errorf("clear retention of %s: %w", org, err)
		}
		return time.Time{}, nil
	}
	var at time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO run_retention (organization_id, retention_seconds) VALUES ($1, $2)
		ON CONFLICT (organization_id) DO UPDATE SET retention_seconds = excluded.retention_seconds, updated_at = now()
		RETURNING updated_at`, org, int64(period/time.Second)).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("set retention of %s: %w", org, err)
	}
	return at, nil
}

// The two deletes. Each takes the oldest finished runs past a period through a partial index
// of finished runs, locks them SKIP LOCKED (a concurrent sweep on another replica takes other
// runs and neither waits) and deletes them. Only finished runs are candidates, and a finished
// run never changes again, so no step, signal or cancel ever waits for a sweep either.
const (
	// deleteServerExpired: past the server's period, whatever the organization ($1 seconds).
	deleteServerExpired = `DELETE FROM runs WHERE id IN (
	SELECT id FROM runs
	WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < now() - make_interval(secs => $1)
	ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
	// deleteOrgExpired: past an organization's own shorter period, one index range for each
	// such organization, $2 runs at most in all.
	deleteOrgExpired = `DELETE FROM runs WHERE id IN (
	SELECT d.id FROM run_retention o
	CROSS JOIN LATERAL (
		SELECT id FROM runs
		WHERE organization_id = o.organization_id AND status IN ('completed', 'failed', 'cancelled')
		  AND finished_at < now() - make_interval(secs => o.retention_seconds)
		ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
	WHERE o.retention_seconds < $1
	LIMIT $2)`
)

// DeleteExpired deletes at most limit runs past the server's period and at most limit past
// their organization's own, each in its own transaction.
func (s *Retention) DeleteExpired(ctx context.Context, server time.Duration, limit int) (int, error) {
	secs := server.Seconds()
	a, err := s.pool.Exec(ctx, deleteServerExpired, secs, limit)
	if err != nil {
		return 0, fmt.Errorf("delete runs past the server's retention: %w", err)
	}
	b, err := s.pool.Exec(ctx, deleteOrgExpired, secs, limit)
	if err != nil {
		return int(a.RowsAffected()), fmt.Errorf("delete runs past their organization's retention: %w", err)
	}
	return int(a.RowsAffected() + b.RowsAffected()), nil
}

// DeleteUnusedDefinitions removes the stored definitions of the workflows none of whose runs
// is left (0015_run_history_bytes.sql: runs do not hold a foreign key to their definition).
// Definitions of a workflow that still has runs stay until its last run is deleted, so their
// number is bounded by the versions run within the retention period.
//
// A dispatch inserts its definition (ON CONFLICT DO NOTHING: usually it is stored already) in
// its runs' transaction. To never remove a definition whose run is being dispatched, the
// delete runs under a SHARE lock on run_definitions: it waits for the dispatches in flight,
// whose runs it then sees, and holds new ones back while it deletes. Only the candidates found
// beforehand without a lock are checked under it, so the lock lasts a few index probes; it
// waits for the lock at most lockWait, and a sweep that could not take it leaves the work to
// the next one. It returns how many definitions it removed.
func (s *Retention) DeleteUnusedDefinitions(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT organization_id, workflow_id FROM run_definitions d
		WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.organization_id = d.organization_id AND r.workflow_id = d.workflow_id)
		LIMIT 1000`)
	if err != nil {
		return 0, fmt.Errorf("find unused definitions: %w", err)
	}
	var orgs, workflows []string
	for rows.Next() {
		var o, w string
		if err := rows.Scan(&o, &w); err != nil {
			rows.Close()
			return 0, fmt.Errorf("find unused definitions: %w", err)
		}
		orgs, workflows = append(orgs, o), append(workflows, w)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find unused definitions: %w", err)
	}
	if len(orgs) == 0 {
		return 0, nil
	}
	var n int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+lockWait+`'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE run_definitions IN SHARE MODE`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM run_definitions d
			USING unnest($1::text[], $2::text[]) AS c(org, wf)
			WHERE d.organization_id = c.org AND d.workflow_id = c.wf
			  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.organization_id = c.org AND r.workflow_id = c.wf)`, orgs, workflows)
		n = tag.RowsAffected()
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: dispatches kept it busy
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("delete unused definitions: %w", err)
	}
	return int(n), nil
}

// lockWait is how long the definitions' cleanup waits for its lock (for the dispatches in
// flight to commit) before it leaves the work to the next sweep.
const lockWait = "200ms"
