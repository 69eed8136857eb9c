package postgres

// Reading a run under its lock: all of it the first time, then what others changed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Cache is what a worker keeps of its run between its transactions: the run as last read
// or written, and the runs.state_rev that reflects (-1: read everything again).
type Cache struct {
	run *run.Run
	rev int64
}

func NewCache() *Cache { return &Cache{rev: -1} }

func (c *Cache) reset() { c.run, c.rev = nil, -1 }

// Locked is a run locked for update in a transaction. broken says why its stored parts
// cannot be read (its definition, input or a block's row): such a run can still be cancelled
// or failed, never advanced; run then holds what could be read (id, organization, status).
type Locked struct {
	run      *run.Run
	broken   error
	status   run.Status // as Locked
	seq, rev int64
	jobState *string
	// inserted: the row was inserted holding the outcome's status, sequence, revision and
	// finish (a run ended at its dispatch), so the outcome's writes do not update it.
	inserted bool
	// group is the run's concurrency group (nil: no limit); admitted whether it holds or held
	// a slot of it (concurrency.go).
	group    *group
	admitted bool
}

// lockRow receives the run's row and the block rows written since the cache's revision.
type lockRow struct {
	status            run.Status
	seq, stateRev     int64
	jobState          *string
	org, workflowID   string
	definition, input []byte
	blocks            []blockRow
	concKey           *string
	concLimit         *int32
	admitted          bool
}

type blockRow struct {
	id, status       string
	attempts, lost   int
	job              int64
	attemptID        *string
	inFlight, queued bool
	retryAt          *time.Time
	wait, output     []byte
}

// queueLock queues the statements that lock run runID for update and read it: the run's row
// (all of it the first time, then only what moves), the state of job jobID in River's table
// (the sweeper finalizes a dead replica's job under the same row lock: that fences its
// worker off), and the block rows written since c's revision. Batched after the lock, the
// block read sees everything committed before the lock was granted.
func queueLock(b *pgx.Batch, runID string, jobID int64, c *Cache, dst *lockRow) {
	if c.run != nil {
		b.Queue(`SELECT r.status, r.change_seq, r.state_rev, (SELECT j.state::text FROM river_job j WHERE j.id = $2),
				r.concurrency_key, r.concurrency_limit, r.admitted
			FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, runID, jobID).
			QueryRow(func(row pgx.Row) error {
				return row.Scan(&dst.status, &dst.seq, &dst.stateRev, &dst.jobState, &dst.concKey, &dst.concLimit, &dst.admitted)
			})
	} else {
		b.Queue(`SELECT r.status, r.change_seq, r.state_rev, (SELECT j.state::text FROM river_job j WHERE j.id = $2),
				r.organization_id, r.workflow_id, `+definitionColumn+`, r.input, r.concurrency_key, r.concurrency_limit, r.admitted
			FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, runID, jobID).
			QueryRow(func(row pgx.Row) error {
				return row.Scan(&dst.status, &dst.seq, &dst.stateRev, &dst.jobState, &dst.org, &dst.workflowID, &dst.definition, &dst.input,
					&dst.concKey, &dst.concLimit, &dst.admitted)
			})
	}
	b.Queue(`SELECT block_id, status, attempts, lost, job, attempt_id, in_flight, queued, retry_at, wait, output
		FROM run_blocks WHERE run_id = $1 AND rev > $2`, runID, c.rev).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var br blockRow
				if err := rows.Scan(&br.id, &br.status, &br.attempts, &br.lost, &br.job, &br.attemptID, &br.inFlight, &br.queued, &br.retryAt, &br.wait, &br.output); err != nil {
					return err
				}
				dst.blocks = append(dst.blocks, br)
			}
			return rows.Err()
		})
}

// locked turns the rows read into the run, through c (which keeps the parts that never
// change parsed, and the blocks).
func (row *lockRow) locked(runID string, c *Cache) *Locked {
	l := &Locked{status: row.status, seq: row.seq, rev: row.stateRev, jobState: row.jobState}
	if c.run == nil {
		r := &run.Run{ID: runID, OrganizationID: row.org, WorkflowID: row.workflowID, State: run.NewState()}
		var err error
		if r.Def, err = run.ParseDefinition(row.definition); err != nil {
			l.broken = err
		} else if err := json.Unmarshal(row.input, &r.Input); err != nil {
			l.broken = inputError(row.input, err)
		}
		c.run = r
	}
	for _, br := range row.blocks {
		if l.broken != nil {
			break
		}
		bs, err := br.state()
		if err != nil {
			l.broken = err
			break
		}
		c.run.State.Put(br.id, bs)
	}
	c.run.Status, c.run.Seq = row.status, row.seq
	l.run = c.run
	l.admitted = row.admitted
	if row.concKey != nil && row.concLimit != nil {
		l.group = &group{org: c.run.OrganizationID, workflow: c.run.WorkflowID, key: *row.concKey, limit: int(*row.concLimit)}
	}
	if l.broken != nil {
		c.reset() // a run that cannot be read is never kept
	} else {
		c.rev = row.stateRev
	}
	return l
}

func (br blockRow) state() (*run.BlockState, error) {
	bs := &run.BlockState{Status: run.BlockStatus(br.status), Attempts: br.attempts, Lost: br.lost, Job: br.job,
		InFlight: br.inFlight, Queued: br.queued, Output: br.output}
	if !bs.Status.Valid() {
		return nil, fmt.Errorf("block %s has status %q", br.id, br.status)
	}
	if br.attemptID != nil {
		bs.AttemptID = *br.attemptID
	}
	if br.retryAt != nil {
		bs.RetryAt = *br.retryAt
	}
	if len(br.wait) > 0 {
		bs.Wait = &run.Wait{}
		if err := json.Unmarshal(br.wait, bs.Wait); err != nil {
			return nil, fmt.Errorf("block %s: wait: %w", br.id, err)
		}
	}
	return bs, nil
}

// lockRun locks a run for update in tx and reads all of it (one round trip).
func lockRun(ctx context.Context, tx pgx.Tx, runID string) (*Locked, error) {
	var row lockRow
	b := &pgx.Batch{}
	queueLock(b, runID, 0, NewCache(), &row)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, run.ErrNotFound
		}
		return nil, fmt.Errorf("lock run %s: %w", runID, err)
	}
	return row.locked(runID, NewCache()), nil
}

// fencedOff reports whether the job no longer holds its run (it is not running in River's
// table any more).
func (l *Locked) fencedOff() bool {
	return l.jobState == nil || *l.jobState != "running"
}
