// Package postgres stores schedules and their fires in the scheduler schema. A fire row per
// (schedule, cutoff) is the exactly-once claim and, while pending, the outbox entry; ticks lock
// schedules and fires with FOR UPDATE SKIP LOCKED, so parallel ticks split the work.
//
// The SQL is written here rather than generated (docs/adr/0011-sql-written-in-the-adapters.md).
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// ScheduleRepository is the Postgres schedule.Repository and schedule.FireQueue.
type ScheduleRepository struct{ pool *pgxpool.Pool }

var (
	_ schedule.Repository = (*ScheduleRepository)(nil)
	_ schedule.FireQueue  = (*ScheduleRepository)(nil)
)

// NewScheduleRepository returns the repository over pool, whose search_path is the scheduler schema.
func NewScheduleRepository(pool *pgxpool.Pool) *ScheduleRepository {
	if pool == nil {
		panic("nil pool")
	}
	return &ScheduleRepository{pool: pool}
}

const (
	columns = `id, organization_id, workflow_id, cron, timezone, input, enabled, last_fired_at, next_fire_at, created_at, updated_at`

	insertSQL = `INSERT INTO schedules (` + columns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

	getSQL = `SELECT ` + columns + ` FROM schedules WHERE organization_id = $1 AND id = $2`

	lockSQL = getSQL + ` FOR UPDATE`

	storeSQL = `UPDATE schedules SET workflow_id = $3, cron = $4, timezone = $5, input = $6, enabled = $7,
		next_fire_at = $8, updated_at = $9 WHERE organization_id = $1 AND id = $2`

	deleteSQL = `DELETE FROM schedules WHERE organization_id = $1 AND id = $2`

	// $2 = '' lists every workflow's schedules; the cursor is (created_at, id), newest first.
	listSQL = `SELECT ` + columns + ` FROM schedules
		WHERE organization_id = $1 AND ($2 = '' OR workflow_id = $2)
		  AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5))
		ORDER BY created_at DESC, id DESC LIMIT $3`

	claimDueSQL = `SELECT ` + columns + ` FROM schedules
		WHERE enabled AND next_fire_at <= $1
		ORDER BY next_fire_at LIMIT $2
		FOR UPDATE SKIP LOCKED`

	// ON CONFLICT DO NOTHING never triggers while the schedule row is locked and advanced in
	// the same transaction; it is the unique (schedule, cutoff) record's last word anyway.
	insertFiresSQL = `INSERT INTO schedule_fires (schedule_id, cutoff, organization_id, workflow_id, input, status, next_attempt_at)
		SELECT u.schedule_id, u.cutoff, u.organization_id, u.workflow_id, u.input, 'pending', $6
		FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::jsonb[])
		  AS u(schedule_id, cutoff, organization_id, workflow_id, input)
		ON CONFLICT (schedule_id, cutoff) DO NOTHING`

	advanceSQL = `UPDATE schedules s SET last_fired_at = u.cutoff, next_fire_at = u.next
		FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS u(id, cutoff, next)
		WHERE s.id = u.id`

	claimPendingSQL = `SELECT schedule_id, cutoff, organization_id, workflow_id, input, attempts FROM schedule_fires
		WHERE status = 'pending' AND next_attempt_at <= $1
		ORDER BY next_attempt_at LIMIT $2
		FOR UPDATE SKIP LOCKED`

	storeOutcomesSQL = `UPDATE schedule_fires f SET status = u.status, run_id = u.run_id, error = u.error,
		attempts = f.attempts + 1, next_attempt_at = u.next_attempt_at, updated_at = $7
		FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
		  AS u(schedule_id, cutoff, status, run_id, error, next_attempt_at)
		WHERE f.schedule_id = u.schedule_id AND f.cutoff = u.cutoff AND f.status = 'pending'`

	disableSQL = `UPDATE schedules SET enabled = false, updated_at = $2 WHERE id = ANY($1::text[])`
)

// Add stores a new schedule.
func (r *ScheduleRepository) Add(ctx context.Context, s *schedule.Schedule) error {
	_, err := r.pool.Exec(ctx, insertSQL, s.ID(), s.OrganizationID(), s.WorkflowID(), s.Cron().Expr(), s.Cron().Timezone(),
		[]byte(s.Input()), s.Enabled(), nullTime(s.LastFiredAt()), nullTime(s.NextFireAt()), s.CreatedAt(), s.UpdatedAt())
	if err != nil {
		return fmt.Errorf("add schedule: %w", err)
	}
	return nil
}

// Get returns a schedule by id.
func (r *ScheduleRepository) Get(ctx context.Context, organizationID, id string) (*schedule.Schedule, error) {
	s, err := scanSchedule(r.pool.QueryRow(ctx, getSQL, organizationID, id))
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return s, nil
}

// List returns a page of schedules, newest first. Rows are read one at a time and the read
// stops at the first that would take the inputs past maxBytes: the page, not the limit, is
// what the scheduler holds.
func (r *ScheduleRepository) List(ctx context.Context, organizationID, workflowID string, after *schedule.Position, limit, maxBytes int) ([]*schedule.Schedule, bool, error) {
	var (
		afterAt *time.Time
		afterID string
	)
	if after != nil {
		afterAt, afterID = &after.CreatedAt, after.ID
	}
	rows, err := r.pool.Query(ctx, listSQL, organizationID, workflowID, limit, afterAt, afterID)
	if err != nil {
		return nil, false, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	var (
		out   []*schedule.Schedule
		bytes int
	)
	for rows.Next() {
		s, err := scanSchedule(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list schedules: %w", err)
		}
		bytes += len(s.Input()) + itemOverhead
		if len(out) > 0 && bytes > maxBytes {
			return out, true, nil
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list schedules: %w", err)
	}
	return out, false, nil
}

// itemOverhead is what a schedule's members other than its input take in a page, at most.
const itemOverhead = 512

// Update runs updateFunc under the schedule's row lock and stores the result.
func (r *ScheduleRepository) Update(ctx context.Context, organizationID, id string, updateFunc func(s *schedule.Schedule) error) error {
	err := pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		s, err := scanSchedule(tx.QueryRow(ctx, lockSQL, organizationID, id))
		if err != nil {
			return err
		}
		if err := updateFunc(s); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, storeSQL, organizationID, id, s.WorkflowID(), s.Cron().Expr(), s.Cron().Timezone(),
			[]byte(s.Input()), s.Enabled(), nullTime(s.NextFireAt()), s.UpdatedAt())
		return err
	})
	if err != nil {
		return fmt.Errorf("update schedule %s: %w", id, err)
	}
	return nil
}

// Delete removes a schedule and its fires, pending ones included.
func (r *ScheduleRepository) Delete(ctx context.Context, organizationID, id string) error {
	tag, err := r.pool.Exec(ctx, deleteSQL, organizationID, id)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %s: %w", id, schedule.ErrNotFound)
	}
	return nil
}

// ClaimDue claims one batch of due schedules in one transaction.
func (r *ScheduleRepository) ClaimDue(ctx context.Context, now time.Time, limit int) ([]schedule.Fire, error) {
	var fires []schedule.Fire
	err := pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimDueSQL, now, limit)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*schedule.Schedule, error) { return scanSchedule(row) })
		if err != nil {
			return err
		}
		n := len(due)
		if n == 0 {
			return nil
		}
		var (
			ids, orgs, wfs = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
			cutoffs, nexts = make([]time.Time, 0, n), make([]*time.Time, 0, n)
			inputs         = make([]string, 0, n)
		)
		for _, s := range due {
			f, ok := s.Claim(now)
			if !ok {
				continue
			}
			fires = append(fires, f)
			ids, orgs, wfs = append(ids, f.ScheduleID), append(orgs, f.OrganizationID), append(wfs, f.WorkflowID)
			cutoffs, nexts = append(cutoffs, f.Cutoff), append(nexts, nullTime(s.NextFireAt()))
			inputs = append(inputs, string(f.Input))
		}
		if len(fires) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, insertFiresSQL, ids, cutoffs, orgs, wfs, inputs, now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, advanceSQL, ids, cutoffs, nexts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due schedules: %w", err)
	}
	return fires, nil
}

// DispatchPending dispatches one batch of pending fires under their row locks.
func (r *ScheduleRepository) DispatchPending(ctx context.Context, now time.Time, limit int,
	dispatchFunc func(ctx context.Context, fires []schedule.Fire) []schedule.Outcome,
) (int, error) {
	n := 0
	err := pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimPendingSQL, now, limit)
		if err != nil {
			return err
		}
		fires, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schedule.Fire, error) {
			var f schedule.Fire
			var input []byte
			err := row.Scan(&f.ScheduleID, &f.Cutoff, &f.OrganizationID, &f.WorkflowID, &input, &f.Attempts)
			f.Cutoff, f.Input = f.Cutoff.UTC(), input
			return f, err
		})
		if err != nil || len(fires) == 0 {
			return err
		}
		outcomes := dispatchFunc(ctx, fires)
		n = len(outcomes)
		var (
			ids, statuses, runIDs, msgs []string
			cutoffs, nextAttempts       []time.Time
			disable                     []string
		)
		stored := now
		for _, o := range outcomes {
			status, next := "dispatched", stored
			switch {
			case o.Dispatched():
			case o.Retry():
				status, next = "pending", stored.Add(schedule.RetryDelay(o.Fire.Attempts+1))
			default:
				status = "failed"
			}
			if o.DisablesSchedule() {
				disable = append(disable, o.Fire.ScheduleID)
			}
			ids, cutoffs, statuses = append(ids, o.Fire.ScheduleID), append(cutoffs, o.Fire.Cutoff), append(statuses, status)
			runIDs, msgs, nextAttempts = append(runIDs, o.RunID), append(msgs, errorText(o)), append(nextAttempts, next)
		}
		if _, err := tx.Exec(ctx, storeOutcomesSQL, ids, cutoffs, statuses, nullStrings(runIDs), nullStrings(msgs), nextAttempts, stored); err != nil {
			return err
		}
		if len(disable) > 0 {
			_, err = tx.Exec(ctx, disableSQL, disable, stored)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dispatch pending fires: %w", err)
	}
	return n, nil
}

func errorText(o schedule.Outcome) string {
	if o.Code == "" {
		return ""
	}
	if o.Message == "" {
		return o.Code
	}
	return o.Code + ": " + o.Message
}

func nullStrings(ss []string) []*string {
	out := make([]*string, len(ss))
	for i := range ss {
		if ss[i] != "" {
			out[i] = &ss[i]
		}
	}
	return out
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func scanSchedule(row pgx.Row) (*schedule.Schedule, error) {
	var (
		id, org, wf, expr, tz string
		input                 []byte
		enabled               bool
		last, next            *time.Time
		createdAt, updatedAt  time.Time
	)
	if err := row.Scan(&id, &org, &wf, &expr, &tz, &input, &enabled, &last, &next, &createdAt, &updatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, schedule.ErrNotFound
		}
		return nil, err
	}
	c, err := schedule.UnmarshalCron(expr, tz)
	if err != nil {
		return nil, fmt.Errorf("stored cron of %s: %w", id, err)
	}
	return schedule.UnmarshalFromDatabase(id, org, wf, c, json.RawMessage(input), enabled,
		utcOrZero(last), utcOrZero(next), createdAt.UTC(), updatedAt.UTC()), nil
}

func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
