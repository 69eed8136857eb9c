package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Horizon margins. A transaction's start time is set a moment before pg_stat_activity shows
// it (and the clock may step back a little): horizonMargin covers that. A transaction left
// open for long (a session idle in transaction) would hold every stream's horizon back and
// make each pass read all the changes since; past maxOverlap it is not waited for (a status
// change committed by a transaction older than that reaches lists by its notification only).
const (
	horizonMargin = time.Second
	maxOverlap    = time.Minute
)

// OrgStatusReader reads an organization's runs by when they took their present status
// (runs.status_at, 0011_run_status_at.sql), for the organization's event stream.
type OrgStatusReader struct{ pool *pgxpool.Pool }

// NewOrgStatusReader returns a reader over pool.
func NewOrgStatusReader(pool *pgxpool.Pool) *OrgStatusReader {
	if pool == nil {
		panic("nil pool")
	}
	return &OrgStatusReader{pool: pool}
}

// horizonQuery is the database's clock and the start of the oldest transaction open in this
// database (other than the reader's own): every status change not committed yet carries
// status_at = now() of its transaction, so none is older than that start. Only client backends
// count (autovacuum and the like write no runs). xact_start is the same timestamp as the
// transaction's now().
const horizonQuery = `SELECT clock_timestamp(), min(xact_start) FROM pg_stat_activity
	WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`

func horizon(now time.Time, oldest *time.Time) time.Time {
	h := now
	if oldest != nil && oldest.Before(h) {
		h = *oldest
	}
	h = h.Add(-horizonMargin)
	if limit := now.Add(-maxOverlap); h.Before(limit) {
		h = limit
	}
	return h
}

// statusColumns are what a run.status event of the organization's stream says of a run: no
// definition, input, output or trigger (a page of 200 runs holding 1 MiB each would be read
// whole for their statuses), and the error's message cut at 4096 characters (the run itself
// has it whole): 200 runs of a catch-up page are a few MB at most, whatever they hold.
const statusColumns = `r.id, r.organization_id, r.workflow_id, r.workflow_version, r.status,
	CASE WHEN jsonb_typeof(r.error) = 'object' AND length(r.error->>'message') > 4096
		THEN r.error || jsonb_build_object('message', left(r.error->>'message', 4096)) ELSE r.error END,
	r.created_at, r.started_at, r.finished_at, w.block_id, w.kind, w.wake_at, w.signal_name`

func scanStatus(row pgx.Row) (run.Record, error) {
	var (
		r                         run.Record
		started, finished, wakeAt *time.Time
		wBlock, wKind, wSignal    *string
	)
	if err := row.Scan(&r.ID, &r.OrganizationID, &r.WorkflowID, &r.WorkflowVersion, &r.Status, &r.Error, &r.CreatedAt, &started, &finished,
		&wBlock, &wKind, &wakeAt, &wSignal); err != nil {
		return run.Record{}, err
	}
	fillRun(&r, started, finished, wakeAt, wBlock, wKind, wSignal)
	return r, nil
}

// Status reads the run id of org as the organization's stream sends it (statusColumns), or
// run.ErrNotFound.
func (s *OrgStatusReader) Status(ctx context.Context, org, id string) (run.Record, error) {
	r, err := scanStatus(s.pool.QueryRow(ctx, `SELECT `+statusColumns+runFrom+` WHERE r.id = $1 AND r.organization_id = $2`, id, org))
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Record{}, fmt.Errorf("status of run %s: %w", id, run.ErrNotFound)
	}
	if err != nil {
		return run.Record{}, fmt.Errorf("status of run %s: %w", id, err)
	}
	return r, nil
}

// Horizon is a time before every status change still to commit.
func (s *OrgStatusReader) Horizon(ctx context.Context) (time.Time, error) {
	var (
		now    time.Time
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, horizonQuery).Scan(&now, &oldest); err != nil {
		return time.Time{}, fmt.Errorf("status horizon: %w", err)
	}
	return horizon(now, oldest), nil
}

// StatusesAfter lists org's runs (of workflowID unless "") whose (status_at, id) is after
// after, in that order, at most limit, and the horizon as it stood before the read. Both
// statements run in one READ COMMITTED transaction, in one round trip: the horizon is read
// first and the runs in a later snapshot, so a transaction missing from the snapshot was
// either open when the horizon was read (and counted) or began after it.
// runs_org_status_at_idx serves the read.
func (s *OrgStatusReader) StatusesAfter(ctx context.Context, org, workflowID string, after port.StatusKey, limit int) (out []port.RunStatus, h time.Time, err error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY`)
	b.Queue(horizonQuery)
	b.Queue(`SELECT `+statusColumns+`, r.status_at`+runFrom+` WHERE r.organization_id = $1 AND (r.status_at, r.id) > ($2, $3)
		AND ($4 = '' OR r.workflow_id = $4) ORDER BY r.status_at, r.id LIMIT $5`, org, after.At, after.RunID, workflowID, limit)
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	defer func() {
		// A failed batch leaves its connection in a transaction: the pool drops such a one.
		if cerr := br.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("status changes of %s: %w", org, cerr)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return nil, time.Time{}, fmt.Errorf("status changes of %s: %w", org, err)
	}
	var (
		now    time.Time
		oldest *time.Time
	)
	if err := br.QueryRow().Scan(&now, &oldest); err != nil {
		return nil, time.Time{}, fmt.Errorf("status changes of %s: %w", org, err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("status changes of %s: %w", org, err)
	}
	for rows.Next() {
		var c port.RunStatus
		if c.Run, err = scanStatus(withExtra{rows, &c.At}); err != nil {
			rows.Close()
			return nil, time.Time{}, fmt.Errorf("status changes of %s: %w", org, err)
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("status changes of %s: %w", org, err)
	}
	if _, err := br.Exec(); err != nil {
		return nil, time.Time{}, fmt.Errorf("status changes of %s: %w", org, err)
	}
	return out, horizon(now, oldest), nil
}
