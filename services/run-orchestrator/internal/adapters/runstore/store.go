// Package runstore is the engine's Postgres adapter: the transaction on a run that locks it,
// reads what changed, applies one event with the domain's interpreter, writes the decisions
// and commits, then hands the run's changes to the event feed; dispatch (runs, idempotency
// keys, first jobs); signals, cancel and timers' wakes; the sweep of dead replicas' runs.
package runstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// database): Insert queues the jobs (repeat a run for more), due at at (zero: now); CancelAll
// cancels every unfinished job of a run; Complete completes the acting job.
type Jobs interface {
	Insert(ctx context.Context, tx pgx.Tx, jobs []NewJob, at time.Time) error
	CancelAll(ctx context.Context, tx pgx.Tx, runID string) error
	Complete(ctx context.Context, tx pgx.Tx, job *Job) error
}

// NewJob is a job to queue: one that continues run RunID of organization Org (the queue
// shares its workers fairly across organizations).
type NewJob struct {
	RunID, Org string
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
	// eager, when set, offers to finish new runs at their dispatch (eager.go).
	eager EagerFunc
	// order keeps each run's changes reaching the feed in commit order.
	order publishOrder
}

// New builds the store. replica names this process in step_attempts.replica.
func New(pool *pgxpool.Pool, interp *run.Interpreter, jobs Jobs, events Publisher, timers Timers, replica string, log *slog.Logger) *Store {
	if pool == nil || interp == nil || jobs == nil || events == nil || timers == nil || log == nil {
		panic("runstore: New needs every dependency")
	}
	return &Store{pool: pool, interp: interp, jobs: jobs, events: events, timers: timers, replica: replica, log: log}
}

// jobWrites makes the queue's side of o in tx: jobs that continue the run, every job of the
// run cancelled. The acting job, when o completes it, is not written here: its worker returns
// and River's completer marks it completed (batched with other jobs' completions), one
// statement fewer in the step's transaction. Until then the job is still running in River's
// table, which fences nothing away (the run is done with it); should its replica die in
// between, the sweep finalizes the job like any other of a dead replica.
func (s *Store) jobWrites(ctx context.Context, tx pgx.Tx, r *run.Run, o *run.Outcome) error {
	if o.NewJobs > 0 {
		jobs := make([]NewJob, o.NewJobs)
		for i := range jobs {
			jobs[i] = NewJob{RunID: r.ID, Org: r.OrganizationID}
		}
		if err := s.jobs.Insert(ctx, tx, jobs, o.JobsAt); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	if o.CancelJobs {
		if err := s.jobs.CancelAll(ctx, tx, r.ID); err != nil {
			return fmt.Errorf("cancel jobs: %w", err)
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

// InlineFunc runs attempt st in the step's transaction, for a connector whose only effect is
// its result (it runs in process, touches nothing outside the run, and gives the same result
// when run again): it returns the attempt's result event, or ok false when st is not such an
// attempt or its result is not one to join (a failure: st is then committed as begun and run
// the usual way).
type InlineFunc func(ctx context.Context, st run.StartAttempt) (ev run.Event, ok bool)

// MaxInline bounds the inline attempts one transaction carries, so a long chain of them still
// commits (and shows its progress) every few blocks.
const MaxInline = 16

// ApplyJob applies the event ev builds to the run of job, in one transaction of Update: a run
// that cannot be read is a *BrokenRunError (the worker fails it with FailJob). A signal wait
// gets the oldest unconsumed signal of its name stored before it began, locked until the
// commit, which it then consumes. While the outcome starts an attempt that inline (if not nil)
// runs at once, its result is applied in the same transaction, up to MaxInline of them: the
// attempt's row is then written begun and finished in one commit.
func (s *Store) ApplyJob(ctx context.Context, job *Job, c *Cache, ev EventFunc, inline InlineFunc) (run.Outcome, error) {
	return s.Update(ctx, job.RunID, job, c, func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
		if l.broken != nil {
			return run.Outcome{}, &BrokenRunError{l.broken}
		}
		o, err := s.apply(ctx, tx, l.run, ev(l.run))
		for n := 0; err == nil && inline != nil && n < MaxInline && o.Fusable(); n++ {
			next, ok := inline(ctx, *o.Start)
			if !ok {
				break
			}
			var more run.Outcome
			if more, err = s.apply(ctx, tx, l.run, next); err == nil {
				o.Then(more)
			}
		}
		return o, err
	})
}

// apply applies event to the locked run r, a signal wait with its buffered signal.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, r *run.Run, event run.Event) (run.Outcome, error) {
	if w, ok := event.(run.Suspended); ok && w.Wait.Kind == run.WaitSignal && !r.Status.Terminal() {
		var sig run.Signal
		err := tx.QueryRow(ctx, `SELECT id, name, payload FROM signals WHERE run_id = $1 AND name = $2 AND consumed_at IS NULL
			ORDER BY created_at, id LIMIT 1 FOR UPDATE`, r.ID, w.Wait.Signal).Scan(&sig.ID, &sig.Name, &sig.Payload)
		switch {
		case err == nil:
			w.Buffered = &sig
			event = w
		case !errors.Is(err, pgx.ErrNoRows):
			return run.Outcome{}, fmt.Errorf("find a buffered signal: %w", err)
		}
	}
	return s.interp.Apply(r, event)
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

// Update runs one transaction on run runID: lock, fn, writes, commit, then what follows the
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
	var admitted []run.Change // runs of the run's concurrency group its end admitted
	if job == nil || !l.fencedOff() {
		tx := connTx{conn}
		o, err = fn(ctx, tx, l)
		var rev int64
		if err == nil && l.broken == nil {
			rev, err = s.queueWrites(writes, l, &o)
		}
		if err == nil {
			err = s.jobWrites(ctx, tx, l.run, &o)
		}
		if err == nil {
			admitted, err = s.release(ctx, tx, l, &o)
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
	// The run's next transaction can commit as soon as this one did, on another worker: its
	// changes must not reach the feed first. Taken while the run's row is locked, the turn
	// holds that next commit's publication until this one's is done.
	done := s.order.hold(runID)
	defer done()
	if err := conn.SendBatch(ctx, writes).Close(); err != nil {
		rollback(ctx, conn)
		return run.Outcome{}, fmt.Errorf("write run %s: %w", runID, err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' {
		rollback(ctx, conn)
		return run.Outcome{}, fmt.Errorf("write run %s: the commit left the connection in transaction state %q", runID, st)
	}
	s.after(runID, &o)
	if len(admitted) > 0 {
		s.events.Publish(admitted)
	}
	return o, nil
}

// publishOrder puts the publications of one run's commits in commit order within this
// replica. A commit takes the run's turn before it is sent, while the run's row is still
// locked, and gives it back once its changes are published; the run's next transaction, which
// waited for that row lock, takes the turn before its own commit, so it cannot publish first.
type publishOrder struct {
	mu   sync.Mutex
	runs map[string]*runTurn
}

type runTurn struct {
	mu      sync.Mutex
	waiting int // holders and waiters: the entry goes when it reaches zero
}

// hold takes runID's turn and returns its release.
func (p *publishOrder) hold(runID string) (release func()) {
	p.mu.Lock()
	if p.runs == nil {
		p.runs = map[string]*runTurn{}
	}
	t := p.runs[runID]
	if t == nil {
		t = &runTurn{}
		p.runs[runID] = t
	}
	t.waiting++
	p.mu.Unlock()
	t.mu.Lock()
	return func() {
		t.mu.Unlock()
		p.mu.Lock()
		if t.waiting--; t.waiting == 0 {
			delete(p.runs, runID)
		}
		p.mu.Unlock()
	}
}
