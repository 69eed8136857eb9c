// The read side of runs and step attempts in the orchestrator schema. Every
// write goes through the engine, under the run's row lock.

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// RunReader reads runs and their attempts.
type RunReader struct{ pool *pgxpool.Pool }

// NewRunReader returns a reader over pool.
func NewRunReader(pool *pgxpool.Pool) *RunReader {
	if pool == nil {
		panic("nil pool")
	}
	return &RunReader{pool: pool}
}

// definitionColumn is the run r's pinned definition, stored once in run_definitions
// (0015_run_history_bytes.sql); NULL if it is missing, which the engine reads as a run it
// cannot read.
const definitionColumn = `(SELECT d.definition FROM run_definitions d
	WHERE d.organization_id = r.organization_id AND d.workflow_id = r.workflow_id AND d.hash = r.definition_hash)`

const runColumns = `r.id, r.organization_id, r.workflow_id, r.workflow_version, ` + definitionColumn + `, r.status, r.input, r.output, r.error, r.trigger,
	r.created_at, r.started_at, r.finished_at, w.block_id, w.kind, w.wake_at, w.signal_name`

// waitJoin joins the run's oldest wait (a waiting run's, as w).
const waitJoin = ` LEFT JOIN LATERAL (SELECT block_id, kind, wake_at, signal_name FROM waits WHERE run_id = r.id ORDER BY created_at LIMIT 1) w ON true`

const runFrom = ` FROM runs r` + waitJoin

func scanRun(row pgx.Row) (run.Record, error) {
	var (
		r                         run.Record
		started, finished, wakeAt *time.Time
		wBlock, wKind, wSignal    *string
	)
	err := row.Scan(&r.ID, &r.OrganizationID, &r.WorkflowID, &r.WorkflowVersion, &r.Definition, &r.Status, &r.Input, &r.Output, &r.Error, &r.Trigger,
		&r.CreatedAt, &started, &finished, &wBlock, &wKind, &wakeAt, &wSignal)
	if err != nil {
		return run.Record{}, err
	}
	fillRun(&r, started, finished, wakeAt, wBlock, wKind, wSignal)
	return r, nil
}

// fillRun sets the run's times and its wait from their nullable columns.
func fillRun(r *run.Record, started, finished, wakeAt *time.Time, wBlock, wKind, wSignal *string) {
	if started != nil {
		r.StartedAt = *started
	}
	if finished != nil {
		r.FinishedAt = *finished
	}
	if wBlock != nil && r.Status == run.StatusWaiting {
		r.Waiting = &run.Waiting{BlockID: *wBlock, Kind: *wKind}
		if wakeAt != nil {
			r.Waiting.Until = *wakeAt
		}
		if wSignal != nil {
			r.Waiting.Signal = *wSignal
		}
	}
}

// queueColumn is why a run is held back for a slot of its concurrency group, as run.Queued's
// JSON (NULL when it is not): the group's in-progress count is read only for such a run.
const queueColumn = `, CASE WHEN r.status = 'queued' AND NOT r.admitted THEN jsonb_build_object('reason', '` + run.QueueReasonConcurrency + `',
	'key', r.concurrency_key, 'limit', r.concurrency_limit,
	'in_progress', (SELECT count(*) FROM runs c WHERE c.organization_id = r.organization_id AND c.workflow_id = r.workflow_id
		AND c.concurrency_key = r.concurrency_key AND c.admitted AND c.status IN ('queued', 'running', 'waiting'))) END`

// Get returns the run id of org, or run.ErrNotFound.
func (s *RunReader) Get(ctx context.Context, org, id string) (run.Record, error) {
	var queue []byte
	r, err := scanRun(withExtra{s.pool.QueryRow(ctx, `SELECT `+runColumns+queueColumn+runFrom+` WHERE r.id = $1 AND r.organization_id = $2`, id, org), &queue})
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Record{}, fmt.Errorf("get run %s: %w", id, run.ErrNotFound)
	}
	if err != nil {
		return run.Record{}, fmt.Errorf("get run %s: %w", id, err)
	}
	if r.Queue, err = toQueued(queue); err != nil {
		return run.Record{}, fmt.Errorf("get run %s: %w", id, err)
	}
	if r.Status == run.StatusQueued && r.Queue == nil {
		if r.Queue, err = s.WaitingForWorker(ctx, org, id); err != nil {
			return run.Record{}, fmt.Errorf("get run %s: %w", id, err)
		}
	}
	return r, nil
}

// workerQuery finds the run's job waiting in the queue and counts the jobs River would take
// before it (its fetch order: priority, tag, id), at most run.MaxAhead of them, and those of
// the run's organization among them. No row: the run has no job waiting (it is being taken).
const workerQuery = `WITH j AS (
	SELECT priority, scheduled_at, id FROM river_job
	WHERE kind = $1 AND args @> jsonb_build_object('run_id', $2::text) AND state = 'available' AND queue = 'default'
	ORDER BY id LIMIT 1)
SELECT count(a.id), count(a.id) FILTER (WHERE a.org = $3)
FROM j LEFT JOIN LATERAL (
	SELECT rj.id, rj.args->>'org' AS org FROM river_job rj
	WHERE rj.state = 'available' AND rj.queue = 'default' AND rj.scheduled_at <= now()
		AND (rj.priority, rj.scheduled_at, rj.id) < (j.priority, j.scheduled_at, j.id)
	ORDER BY rj.priority, rj.scheduled_at, rj.id LIMIT $4) a ON true
GROUP BY j.id`

// WaitingForWorker is why a queued run that holds no concurrency slot waits: its job is in
// the queue, behind the jobs it counts (nil when it has no job waiting). Only a read of one
// queued run, or its event stream while it is queued, pays for it.
func (s *RunReader) WaitingForWorker(ctx context.Context, org, id string) (*run.Queued, error) {
	var ahead, own int
	err := s.pool.QueryRow(ctx, workerQuery, run.Spec, id, org, run.MaxAhead).Scan(&ahead, &own)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue position: %w", err)
	}
	return &run.Queued{Reason: run.QueueReasonWorker, Ahead: ahead, AheadOwn: own}, nil
}

// toQueued reads a queue column (nil: not held back).
func toQueued(raw []byte) (*run.Queued, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var q run.Queued
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return &q, nil
}

// runBytes is what a run costs a page: its JSON members as the text Postgres stores, plus 512
// bytes for the rest (ids, status, times, member names), so a page of small runs stops at its
// budget too. The response is compact JSON: at most this, except for U+2028 and U+2029, which
// it escapes (3 bytes become 6).
const runBytes = `(octet_length(r.input::text) + coalesce(octet_length(r.output::text), 0) + coalesce(octet_length(r.error::text), 0)
	+ octet_length(r.trigger::text) + 512)::bigint`

// runFilter is a list's filter: $1 organization, $2 workflow ("" any), $3 status ("" any). Each
// combination of filters has a statement of its own, in which a filter that is set is a plain
// equality: a statement that left the choice to its parameters (`$2 = ” OR r.workflow_id =
// $2`) gets a generic plan once prepared, which cannot use the workflow's or the status's index,
// and walks the whole organization to fill a page of a rare status (docs/QUERY_PLANS.md). An
// unset filter still names its parameter, as a constant condition.
func runFilter(wf, status bool) string {
	f := `r.organization_id = $1`
	if wf {
		f += ` AND r.workflow_id = $2`
	} else {
		f += ` AND $2::text = ''`
	}
	if status {
		f += ` AND r.status = $3`
	} else {
		f += ` AND $3::text = ''`
	}
	return f
}

// listQueries are listQuery for each combination of filters and of a cursor ($4, likewise a
// bound on the index only when it is one in the statement): [workflow set][status set][after
// set].
var listQueries = func() (q [2][2][2]string) { //nolint:gochecknoglobals // constant statements
	for wf := range 2 {
		for st := range 2 {
			q[wf][st][0] = listQuery(runFilter(wf == 1, st == 1), `$4::text = ''`)
			q[wf][st][1] = listQuery(runFilter(wf == 1, st == 1), `r.id < $4`)
		}
	}
	return q
}()

// listQuery walks the organization's runs newest first, one index step at a time, adding up
// their sizes, and stops after the first run past the page: the limit ($5) or the byte budget
// ($6), whichever comes first (the first run is always in the page, whatever its size). Only
// the runs walked are sized and only those in the page are read in full, so neither the
// database nor this process handles more than the budget and one run, however large the runs
// and the limit. The walk's length tells whether runs follow the page. A list sends no
// definition: it is not read.
//
// Each step finds the next id in a subquery of its own, which needs only the filter's index
// (an index-only scan of (organization_id[, workflow_id | status], id)), and reads the run by
// its key to size it. Asked for the id and the size at once, the planner may walk the primary
// key backwards and filter on the organization instead (it expects a large organization's runs
// to come up within a few rows), which reads every newer run of every other organization first
// when that organization's runs are not the newest: 38,600 of them for a first page at 5.7
// million runs (docs/QUERY_PLANS.md).
func listQuery(runFilter, after string) string {
	return `WITH RECURSIVE walk AS (
	(SELECT r.id, 1 AS n, ` + runBytes + ` AS total FROM runs r
		WHERE r.id = (SELECT r.id FROM runs r WHERE ` + runFilter + ` AND ` + after + ` ORDER BY r.id DESC LIMIT 1))
	UNION ALL
	SELECT nx.id, p.n + 1, p.total + nx.size FROM walk p CROSS JOIN LATERAL (
		SELECT r.id, ` + runBytes + ` AS size FROM runs r
		WHERE r.id = (SELECT r.id FROM runs r WHERE ` + runFilter + ` AND r.id < p.id ORDER BY r.id DESC LIMIT 1)) nx
	WHERE p.n <= $5 AND (p.n = 1 OR p.total <= $6)
)
SELECT r.id, r.organization_id, r.workflow_id, r.workflow_version, NULL::jsonb, r.status, r.input, r.output, r.error, r.trigger,
	r.created_at, r.started_at, r.finished_at, w.block_id, w.kind, w.wake_at, w.signal_name, (SELECT max(n) FROM walk)
FROM walk p JOIN runs r ON r.id = p.id` + waitJoin + `
WHERE p.n <= $5 AND (p.n = 1 OR p.total <= $6) ORDER BY r.id DESC`
}

// List returns org's runs newest first, filtered, after the id f.After: at most f.Limit, and
// no more than fit in maxBytes (at least one). More says whether runs follow the page.
func (s *RunReader) List(ctx context.Context, org string, f run.ListFilter, maxBytes int64) (port.RunPage, error) {
	q := listQueries[b2i(f.WorkflowID != "")][b2i(f.Status != "")][b2i(f.After != "")]
	rows, err := s.pool.Query(ctx, q, org, f.WorkflowID, string(f.Status), f.After, f.Limit, maxBytes)
	if err != nil {
		return port.RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var (
		page   port.RunPage
		walked int
	)
	for rows.Next() {
		r, err := scanRun(withExtra{rows, &walked})
		if err != nil {
			return port.RunPage{}, fmt.Errorf("list runs: %w", err)
		}
		page.Runs = append(page.Runs, r)
	}
	if err := rows.Err(); err != nil {
		return port.RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	page.More = walked > len(page.Runs)
	return page, nil
}

// attemptBytes is what an attempt costs a page of logs, as runBytes is a run's (256 bytes for
// the rest).
const attemptBytes = `(coalesce(octet_length(a.input::text), 0) + coalesce(octet_length(a.output::text), 0)
	+ coalesce(octet_length(a.error::text), 0) + 256)::bigint`

// logsQuery walks the run's attempts by change sequence after $2 as listQuery walks runs: at
// most $3 of them, no more than fit in $4 bytes (at least one), read in full only once the
// page is known.
const logsQuery = `WITH RECURSIVE walk AS (
	(SELECT a.seq, 1 AS n, ` + attemptBytes + ` AS total FROM step_attempts a WHERE a.run_id = $1 AND a.seq > $2 ORDER BY a.seq LIMIT 1)
	UNION ALL
	SELECT nx.seq, p.n + 1, p.total + nx.size FROM walk p CROSS JOIN LATERAL (
		SELECT a.seq, ` + attemptBytes + ` AS size FROM step_attempts a WHERE a.run_id = $1 AND a.seq > p.seq ORDER BY a.seq LIMIT 1) nx
	WHERE p.n < $3 AND p.total <= $4
)
SELECT a.id, a.block_id, a.type, a.attempt, a.status, a.seq, a.started_at, a.finished_at, a.input, a.output, a.error
FROM walk p JOIN step_attempts a ON a.run_id = $1 AND a.seq = p.seq
WHERE p.n = 1 OR p.total <= $4 ORDER BY a.seq`

// Logs lists attempts of the run with seq > after, in seq order: at most limit, and no more
// than fit in maxBytes (at least one).
func (s *RunReader) Logs(ctx context.Context, org, runID string, after int64, limit int, maxBytes int64) ([]run.Attempt, error) {
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT organization_id FROM runs WHERE id = $1`, runID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != org) {
		return nil, fmt.Errorf("logs of %s: %w", runID, run.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", runID, err)
	}
	rows, err := s.pool.Query(ctx, logsQuery, runID, after, limit, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", runID, err)
	}
	defer rows.Close()
	var out []run.Attempt
	for rows.Next() {
		var (
			a        run.Attempt
			finished *time.Time
		)
		if err := rows.Scan(&a.ID, &a.BlockID, &a.Type, &a.Attempt, &a.Status, &a.Seq, &a.StartedAt, &finished, &a.Input, &a.Output, &a.Error); err != nil {
			return nil, fmt.Errorf("logs of %s: %w", runID, err)
		}
		if finished != nil {
			a.FinishedAt = *finished
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Snapshot reads the run id of org, its attempts whose latest change is after the sequence
// after and its status log from after on, in one repeatable-read transaction so they agree
// (run.ErrNotFound for a run that is not org's). The transaction and its three reads travel in
// one pipeline, one round trip: a stream reads again on every change of its run.
func (s *RunReader) Snapshot(ctx context.Context, org, id string, after int64) (snap run.Snapshot, err error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	// The events need the run's status and what goes with it, not its definition or input.
	b.Queue(`SELECT r.id, r.organization_id, r.workflow_id, r.workflow_version, r.status, r.error, r.created_at, r.started_at,
		r.finished_at, w.block_id, w.kind, w.wake_at, w.signal_name, r.change_seq`+runFrom+` WHERE r.id = $1 AND r.organization_id = $2`, id, org)
	b.Queue(`SELECT id, block_id, type, attempt, status, seq, coalesce(started_seq, 0), started_at, finished_at, retry_at,
		error, coalesce(octet_length(output::text), 0)
		FROM step_attempts WHERE run_id = $1 AND seq > $2 ORDER BY seq`, id, after)
	// From the cursor's own sequence on: a status logged at the sequence of an attempt's
	// change (a run migrated in flight) may not have been sent yet.
	b.Queue(`SELECT seq, status, wait_block, wait_kind, wake_at, signal_name, at, queue
		FROM run_statuses WHERE run_id = $1 AND seq >= $2 ORDER BY seq`, id, after)
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	defer func() {
		// A failed batch leaves its connection in a transaction: the pool drops such a one.
		if cerr := br.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("snapshot of %s: %w", id, cerr)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return run.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	snap.Run, snap.ChangeSeq, err = scanSnapshotRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return run.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, run.ErrNotFound)
	}
	if err != nil {
		return run.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	if snap.Attempts, err = readAttemptChanges(br); err != nil {
		return run.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	if snap.Statuses, err = readStatuses(br); err != nil {
		return run.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	if _, err := br.Exec(); err != nil {
		return run.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	return snap, nil
}

// scanSnapshotRun scans the run as Snapshot reads it: no definition, input, output or trigger.
func scanSnapshotRun(row pgx.Row) (run.Record, int64, error) {
	var (
		r                         run.Record
		seq                       int64
		started, finished, wakeAt *time.Time
		wBlock, wKind, wSignal    *string
	)
	if err := row.Scan(&r.ID, &r.OrganizationID, &r.WorkflowID, &r.WorkflowVersion, &r.Status, &r.Error, &r.CreatedAt, &started, &finished,
		&wBlock, &wKind, &wakeAt, &wSignal, &seq); err != nil {
		return run.Record{}, 0, err
	}
	fillRun(&r, started, finished, wakeAt, wBlock, wKind, wSignal)
	return r, seq, nil
}

// readAttemptChanges reads the batch's next result: attempts as the stream reads them.
func readAttemptChanges(br pgx.BatchResults) ([]run.AttemptChange, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []run.AttemptChange
	for rows.Next() {
		var (
			a                 run.AttemptChange
			finished, retryAt *time.Time
		)
		if err := rows.Scan(&a.ID, &a.BlockID, &a.Type, &a.Attempt, &a.Status, &a.Seq, &a.StartedSeq, &a.StartedAt, &finished, &retryAt,
			&a.Error, &a.OutputBytes); err != nil {
			return nil, err
		}
		if finished != nil {
			a.FinishedAt = *finished
		}
		if retryAt != nil {
			a.RetryAt = *retryAt
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// readStatuses reads the batch's next result: status log entries.
func readStatuses(br pgx.BatchResults) ([]run.StatusChange, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []run.StatusChange
	for rows.Next() {
		var (
			c                   run.StatusChange
			block, kind, signal *string
			wake                *time.Time
		)
		var queue []byte
		if err := rows.Scan(&c.Seq, &c.Status, &block, &kind, &wake, &signal, &c.At, &queue); err != nil {
			return nil, err
		}
		q, err := toQueued(queue)
		if err != nil {
			return nil, err
		}
		c.Queue = q
		if block != nil && kind != nil && c.Status == run.StatusWaiting {
			c.Waiting = &run.Waiting{BlockID: *block, Kind: *kind}
			if wake != nil {
				c.Waiting.Until = *wake
			}
			if signal != nil {
				c.Waiting.Signal = *signal
			}
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withExtra scans the run's columns and then extra ones.
type withExtra struct {
	row   pgx.Row
	extra any
}

func (w withExtra) Scan(dest ...any) error { return w.row.Scan(append(dest, w.extra)...) }
