// Package runstore is the engine's Postgres adapter: the transaction on a run that locks it,
// reads what changed, applies one event with the domain's interpreter, writes the decisions
// and commits, then hands the run's changes to the event feed; dispatch (runs, idempotency
// keys, first jobs); signals, cancel and timers' wakes; the sweep of dead replicas' runs.
package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"log/slog"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The Postgres side of a run's transaction: lock the run and read what changed, apply the
// interpreter's decisions as writes, commit, then publish the run's changes. The interpreter
// state is one row per block (run_blocks); a step writes the rows it changed, and a worker
// that keeps its run between transactions reads back only the rows others wrote since.

// Schema is where the engine's tables and River's live.
const Schema = "orchestrator"

// Jobs is the job queue, written in the run's own transaction (River's tables share the
// database): Insert queues one job per run id (repeat an id for more), due at at (zero: now);
// CancelAll cancels every unfinished job of a run; Complete completes the acting job.
type Jobs interface {
	Insert(ctx context.Context, tx pgx.Tx, runIDs []string, at time.Time) error
	CancelAll(ctx context.Context, tx pgx.Tx, runID string) error
	Complete(ctx context.Context, tx pgx.Tx, job *Job) error
}

// Job is the queue job a worker drives a run in. Handle is the queue's own value for it.
type Job struct {
	ID     int64
	RunID  string
	Try    int
	Handle any
}

// Publisher is the feed of run changes: Publish gets the changes of one commit, in order, once
// the commit has succeeded. It must not block.
type Publisher interface {
	Publish(changes []run.Change)
}

// Timers arms in-process timers for waits due soon (a wait's end wakes the run with Wake).
type Timers interface {
	Arm(runID, blockID string, at time.Time)
}

// Store is the engine's Postgres adapter.
type Store struct {
	pool    *pgxpool.Pool
	interp  *run.Interpreter
	jobs    Jobs
	events  Publisher
	timers  Timers
	replica string
	log     *slog.Logger
}

// New builds the store. replica names this process in step_attempts.replica.
func New(pool *pgxpool.Pool, interp *run.Interpreter, jobs Jobs, events Publisher, timers Timers, replica string, log *slog.Logger) *Store {
	if pool == nil || interp == nil || jobs == nil || events == nil || timers == nil || log == nil {
		panic("runstore: New needs every dependency")
	}
	return &Store{pool: pool, interp: interp, jobs: jobs, events: events, timers: timers, replica: replica, log: log}
}

// Cache is what a worker keeps of its run between its transactions: the run as last read
// or written, and the runs.state_rev that reflects (-1: read everything again).
type Cache struct {
	run *run.Run
	rev int64
}

func NewCache() *Cache { return &Cache{rev: -1} }

func (c *Cache) reset() { c.run, c.rev = nil, -1 }

// locked is a run locked for update in a transaction. broken says why its stored parts
// cannot be read (its definition, input or a block's row): such a run can still be cancelled
// or failed, never advanced; run then holds what could be read (id, organization, status).
type Locked struct {
	run      *run.Run
	broken   error
	status   run.Status // as Locked
	seq, rev int64
	jobState *string
}

// lockRow receives the run's row and the block rows written since the cache's revision.
type lockRow struct {
	status            run.Status
	seq, stateRev     int64
	jobState          *string
	org, workflowID   string
	definition, input []byte
	blocks            []blockRow
}

type blockRow struct {
	id, status     string
	attempts, lost int
	job            int64
	attemptID      *string
	inFlight       bool
	retryAt        *time.Time
	wait, output   []byte
}

// queueLock queues the statements that lock run runID for update and read it: the run's row
// (all of it the first time, then only what moves), the state of job jobID in River's table
// (the sweeper finalizes a dead replica's job under the same row lock: that fences its
// worker off), and the block rows written since c's revision. Batched after the lock, the
// block read sees everything committed before the lock was granted.
func queueLock(b *pgx.Batch, runID string, jobID int64, c *Cache, dst *lockRow) {
	if c.run != nil {
		b.Queue(`SELECT r.status, r.change_seq, r.state_rev, (SELECT j.state::text FROM river_job j WHERE j.id = $2)
			FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, runID, jobID).
			QueryRow(func(row pgx.Row) error {
				return row.Scan(&dst.status, &dst.seq, &dst.stateRev, &dst.jobState)
			})
	} else {
		b.Queue(`SELECT r.status, r.change_seq, r.state_rev, (SELECT j.state::text FROM river_job j WHERE j.id = $2),
				r.organization_id, r.workflow_id, r.definition, r.input
			FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, runID, jobID).
			QueryRow(func(row pgx.Row) error {
				return row.Scan(&dst.status, &dst.seq, &dst.stateRev, &dst.jobState, &dst.org, &dst.workflowID, &dst.definition, &dst.input)
			})
	}
	b.Queue(`SELECT block_id, status, attempts, lost, job, attempt_id, in_flight, retry_at, wait, output
		FROM run_blocks WHERE run_id = $1 AND rev > $2`, runID, c.rev).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var br blockRow
				if err := rows.Scan(&br.id, &br.status, &br.attempts, &br.lost, &br.job, &br.attemptID, &br.inFlight, &br.retryAt, &br.wait, &br.output); err != nil {
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
	if l.broken != nil {
		c.reset() // a run that cannot be read is never kept
	} else {
		c.rev = row.stateRev
	}
	return l
}

func (br blockRow) state() (*run.BlockState, error) {
	bs := &run.BlockState{Status: run.BlockStatus(br.status), Attempts: br.attempts, Lost: br.lost, Job: br.job,
		InFlight: br.inFlight, Output: br.output}
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

// queueWrites queues the writes of outcome o on the locked run l into b: attempts begun and
// ended, the blocks that changed, waits, a consumed signal and the run's row. It returns the
// run's new state revision (l.rev when nothing changed).
func (s *Store) queueWrites(b *pgx.Batch, l *Locked, o *run.Outcome) (int64, error) {
	r := l.run
	for _, st := range o.Begun {
		params, err := json.Marshal(st.Params)
		if err != nil {
			return 0, fmt.Errorf("attempt input: %w", err)
		}
		b.Queue(`INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, input, replica, seq, started_at)
			VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, now())`,
			st.ID, r.ID, st.Block.ID, st.Block.Type, st.Attempt, string(params), s.replica, st.Seq)
	}
	for _, a := range o.Ended {
		b.Queue(`UPDATE step_attempts SET status = $2, output = $3, error = $4, seq = $5, finished_at = now() WHERE id = $1`,
			a.ID, a.Status, jsonText(a.Output), jsonText(a.Error), a.Seq)
	}
	if len(o.Changed) == 0 && r.Status == l.status && r.Seq == l.seq && o.Finish == nil && len(o.Armed) == 0 &&
		len(o.Released) == 0 && !o.ReleaseAll && o.Consume == nil {
		return l.rev, nil
	}
	rev := l.rev + 1
	if len(o.Changed) > 0 {
		if err := queueBlocks(b, r, o.Changed, rev); err != nil {
			return 0, err
		}
	}
	for _, w := range o.Armed {
		var sig *string
		if w.Wait.Kind == run.WaitSignal {
			sig = &w.Wait.Signal
		}
		var wake *time.Time
		if !w.Wait.WakeAt.IsZero() {
			wake = &w.Wait.WakeAt
		}
		b.Queue(`INSERT INTO waits (run_id, block_id, kind, signal_name, wake_at, attempt_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.ID, w.Block, w.Wait.Kind, sig, wake, w.AttemptID)
	}
	if o.ReleaseAll {
		b.Queue(`DELETE FROM waits WHERE run_id = $1`, r.ID)
	} else if len(o.Released) > 0 {
		b.Queue(`DELETE FROM waits WHERE run_id = $1 AND block_id = ANY($2)`, r.ID, o.Released)
	}
	if o.Consume != nil {
		b.Queue(`UPDATE signals SET consumed_by = $2, consumed_at = now() WHERE id = $1`, o.Consume.SignalID, o.Consume.AttemptID)
	}
	if f := o.Finish; f != nil {
		b.Queue(`UPDATE runs SET status = $2, change_seq = $3, state_rev = $4, updated_at = now(),
			output = $5, error = $6, finished_at = now(), started_at = coalesce(started_at, now())
			WHERE id = $1`, r.ID, string(r.Status), r.Seq, rev, jsonText(f.Output), jsonText(f.Error))
	} else {
		b.Queue(`UPDATE runs SET status = $2, change_seq = $3, state_rev = $4, updated_at = now(),
			started_at = CASE WHEN $2 IN ('running', 'waiting') THEN coalesce(started_at, now()) ELSE started_at END
			WHERE id = $1`, r.ID, string(r.Status), r.Seq, rev)
	}
	return rev, nil
}

// queueBlocks upserts the rows of the blocks ids in one statement.
func queueBlocks(b *pgx.Batch, r *run.Run, ids []string, rev int64) error {
	n := len(ids)
	status, attemptIDs, waits, outputs := make([]string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	attempts, lost := make([]int32, n), make([]int32, n)
	jobs := make([]int64, n)
	inFlight := make([]bool, n)
	retryAt := make([]*time.Time, n)
	for i, id := range ids {
		bs := r.State.Block(id)
		status[i], attempts[i], lost[i], jobs[i], inFlight[i] = string(bs.Status), int32(bs.Attempts), int32(bs.Lost), bs.Job, bs.InFlight //nolint:gosec // attempts are capped at 10
		if bs.AttemptID != "" {
			attemptIDs[i] = &bs.AttemptID
		}
		if !bs.RetryAt.IsZero() {
			retryAt[i] = &bs.RetryAt
		}
		if bs.Wait != nil {
			w, err := json.Marshal(bs.Wait)
			if err != nil {
				return fmt.Errorf("wait of %s: %w", id, err)
			}
			waits[i] = jsonText(w)
		}
		outputs[i] = jsonText(bs.Output)
	}
	b.Queue(`INSERT INTO run_blocks (run_id, block_id, status, attempts, lost, job, attempt_id, in_flight, retry_at, wait, output, rev)
		SELECT $1, b.id, b.status, b.attempts, b.lost, b.job, b.attempt_id, b.in_flight, b.retry_at, b.wait::jsonb, b.output::jsonb, $12
		FROM unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::bool[], $9::timestamptz[], $10::text[], $11::text[])
			AS b(id, status, attempts, lost, job, attempt_id, in_flight, retry_at, wait, output)
		ON CONFLICT (run_id, block_id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts, lost = excluded.lost,
			job = excluded.job, attempt_id = excluded.attempt_id, in_flight = excluded.in_flight, retry_at = excluded.retry_at,
			wait = excluded.wait, output = excluded.output, rev = excluded.rev`,
		r.ID, ids, status, attempts, lost, jobs, attemptIDs, inFlight, retryAt, waits, outputs, rev)
	return nil
}

// jsonText is a JSON document as a nullable text parameter.
func jsonText(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	s := string(raw)
	return &s
}

// jobWrites makes the queue's side of o in tx: jobs that continue the run, every job of the
// run cancelled, the acting job completed.
func (s *Store) jobWrites(ctx context.Context, tx pgx.Tx, r *run.Run, o *run.Outcome, job *Job) error {
	if o.NewJobs > 0 {
		ids := make([]string, o.NewJobs)
		for i := range ids {
			ids[i] = r.ID
		}
		if err := s.jobs.Insert(ctx, tx, ids, o.JobsAt); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	if o.CancelJobs {
		if err := s.jobs.CancelAll(ctx, tx, r.ID); err != nil {
			return fmt.Errorf("cancel jobs: %w", err)
		}
	}
	if o.CompleteJob && job != nil {
		if err := s.jobs.Complete(ctx, tx, job); err != nil {
			return fmt.Errorf("complete job: %w", err)
		}
	}
	return nil
}

// CompleteJob completes a job whose run is gone (runs cannot be deleted today).
func (s *Store) CompleteJob(ctx context.Context, job *Job) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.jobs.Complete(ctx, tx, job) })
}

// EventFunc is the event a job's worker applies, built on the locked run.
type EventFunc func(r *run.Run) run.Event

// ApplyJob applies the event ev builds to the run of job, in one transaction of Update: a run
// that cannot be read is a *BrokenRunError (the worker fails it with FailJob). A signal wait
// gets the oldest unconsumed signal of its name stored before it began, locked until the
// commit, which it then consumes.
func (s *Store) ApplyJob(ctx context.Context, job *Job, c *Cache, ev EventFunc) (run.Outcome, error) {
	return s.Update(ctx, job.RunID, job, c, func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
		if l.broken != nil {
			return run.Outcome{}, &BrokenRunError{l.broken}
		}
		event := ev(l.run)
		if w, ok := event.(run.Suspended); ok && w.Wait.Kind == run.WaitSignal && !l.run.Status.Terminal() {
			var sig run.Signal
			err := tx.QueryRow(ctx, `SELECT id, name, payload FROM signals WHERE run_id = $1 AND name = $2 AND consumed_at IS NULL
				ORDER BY created_at, id LIMIT 1 FOR UPDATE`, l.run.ID, w.Wait.Signal).Scan(&sig.ID, &sig.Name, &sig.Payload)
			switch {
			case err == nil:
				w.Buffered = &sig
				event = w
			case !errors.Is(err, pgx.ErrNoRows):
				return run.Outcome{}, fmt.Errorf("find a buffered signal: %w", err)
			}
		}
		return s.interp.Apply(l.run, event)
	})
}

// after is what follows a commit that carried o: the run's changes are published, the
// timers of waits due soon armed.
func (s *Store) after(runID string, o *run.Outcome) {
	for _, w := range o.Armed {
		if !w.Wait.WakeAt.IsZero() {
			s.timers.Arm(runID, w.Block, w.Wait.WakeAt)
		}
	}
	if len(o.Changes) > 0 {
		s.events.Publish(o.Changes)
	}
}

// UpdateFunc decides, in the run's transaction, what happens to the locked run. l.broken set
// means the run cannot be read; l.run then holds only its identity and status.
type UpdateFunc func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error)

// update runs one transaction on run runID: lock, fn, writes, commit, then what follows the
// commit. With a job, the job must still hold the run (fenced off: fn is not called and
// nothing is written), and the transaction takes two round trips to Postgres: BEGIN travels
// with the lock and the reads, COMMIT with the writes (River's statements, and any fn runs
// itself, go at once). It ignores ctx's cancellation: a result is recorded even when the run
// was cancelled while its connector ran. A failed transaction empties c, whose run fn may
// have changed in memory; the run gone is run.ErrNotFound.
func (s *Store) Update(ctx context.Context, runID string, job *Job, c *Cache, fn UpdateFunc) (o run.Outcome, err error) {
	ctx = context.WithoutCancel(ctx)
	defer func() {
		if err != nil {
			c.reset()
		}
	}()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return o, fmt.Errorf("acquire a connection: %w", err)
	}
	// Release destroys a connection left inside a transaction rather than reuse it.
	defer pc.Release()
	conn := pc.Conn()
	var jobID int64
	if job != nil {
		jobID = job.ID
	}
	lock := &pgx.Batch{}
	lock.Queue("BEGIN")
	var row lockRow
	queueLock(lock, runID, jobID, c, &row)
	if err := conn.SendBatch(ctx, lock).Close(); err != nil {
		rollback(ctx, conn)
		if errors.Is(err, pgx.ErrNoRows) {
			return o, run.ErrNotFound
		}
		return o, fmt.Errorf("lock run %s: %w", runID, err)
	}
	l := row.locked(runID, c)
	writes := &pgx.Batch{}
	if job == nil || !l.fencedOff() {
		tx := connTx{conn}
		o, err = fn(ctx, tx, l)
		var rev int64
		if err == nil && l.broken == nil {
			rev, err = s.queueWrites(writes, l, &o)
		}
		if err == nil {
			err = s.jobWrites(ctx, tx, l.run, &o, job)
		}
		if err != nil {
			rollback(ctx, conn)
			return run.Outcome{}, err
		}
		if l.broken == nil {
			c.rev = rev
		}
	}
	writes.Queue("COMMIT")
	if err := conn.SendBatch(ctx, writes).Close(); err != nil {
		rollback(ctx, conn)
		return run.Outcome{}, fmt.Errorf("write run %s: %w", runID, err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' {
		rollback(ctx, conn)
		return run.Outcome{}, fmt.Errorf("write run %s: the commit left the connection in transaction state %q", runID, st)
	}
	s.after(runID, &o)
	return o, nil
}
