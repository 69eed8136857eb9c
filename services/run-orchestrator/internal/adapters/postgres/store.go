// The engine's run repository on Postgres (engine.RunRepository, RunStore): the
// transaction on a run that locks it, reads what changed, lets the engine decide, writes the
// decisions and commits, then hands the run's changes to the event feed; dispatch (runs,
// idempotency keys, first jobs); the sweep of dead replicas' runs.

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"log/slog"

	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The Postgres side of a run's transaction: lock the run and read what changed, write the
// engine's decisions, commit, then publish the run's changes. The interpreter
// state is one row per block (run_blocks); a step writes the rows it changed, and a worker
// that keeps its run between transactions reads back only the rows others wrote since.

// Schema is where the engine's tables and River's live.
const Schema = "orchestrator"

// RunStore is the engine's run repository on Postgres.
type RunStore struct {
	pool    *pgxpool.Pool
	jobs    engine.Jobs
	events  engine.Publisher
	timers  engine.Timers
	replica string
	log     *slog.Logger
	// order keeps each run's changes reaching the feed in commit order.
	order publishOrder
}

// NewRunStore builds the store. replica names this process in step_attempts.replica.
func NewRunStore(pool *pgxpool.Pool, jobs engine.Jobs, events engine.Publisher, timers engine.Timers, replica string, log *slog.Logger) *RunStore {
	if pool == nil || jobs == nil || events == nil || timers == nil || log == nil {
		panic("postgres: NewRunStore needs every dependency")
	}
	return &RunStore{pool: pool, jobs: jobs, events: events, timers: timers, replica: replica, log: log}
}

// jobWrites makes the queue's side of o in tx: jobs that continue the run, every job of the
// run cancelled. The acting job, when o completes it, is not written here: its worker returns
// and River's completer marks it completed (batched with other jobs' completions), one
// statement fewer in the step's transaction. Until then the job is still running in River's
// table, which fences nothing away (the run is done with it); should its replica die in
// between, the sweep finalizes the job like any other of a dead replica.
func (s *RunStore) jobWrites(ctx context.Context, tx pgx.Tx, r *run.Run, o *run.Outcome) error {
	if o.NewJobs > 0 {
		jobs := make([]engine.NewJob, o.NewJobs)
		for i := range jobs {
			jobs[i] = engine.NewJob{RunID: r.ID, Org: r.OrganizationID}
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

// CompleteJob completes a job whose run is gone (deleted by the retention sweep).
func (s *RunStore) CompleteJob(ctx context.Context, job *engine.Job) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.jobs.Complete(ctx, tx, job) })
}

// Update is the engine's transaction on run runID (engine.RunRepository). A job's run is read
// through the job's cache, which keeps it between the job's transactions.
func (s *RunStore) Update(ctx context.Context, runID string, job *engine.Job, fn engine.UpdateFunc) (run.Outcome, error) {
	c := NewCache()
	if job != nil {
		if jc, ok := job.Cache.(*Cache); ok {
			c = jc
		} else {
			job.Cache = c
		}
	}
	return s.update(ctx, runID, job, c, func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error) {
		return fn(ctx, runTx{s: s, tx: tx, l: l})
	})
}

// runTx is a locked run as the engine sees it (engine.RunTx).
type runTx struct {
	s  *RunStore
	tx pgx.Tx
	l  *Locked
}

func (t runTx) Run() *run.Run      { return t.l.run }
func (t runTx) Status() run.Status { return t.l.status }
func (t runTx) Broken() error      { return t.l.broken }

// StoreSignal stores a signal sent to the run.
func (t runTx) StoreSignal(ctx context.Context, id, name string, payload json.RawMessage) error {
	if _, err := t.tx.Exec(ctx, `INSERT INTO signals (id, run_id, name, payload) VALUES ($1, $2, $3, $4)`, id, t.l.run.ID, name, jsonText(payload)); err != nil {
		return fmt.Errorf("insert signal: %w", err)
	}
	return nil
}

// Fail ends a run that cannot go on, in SQL of its own (failBroken).
func (t runTx) Fail(ctx context.Context, cause error, status run.Status) (run.Outcome, error) {
	return t.s.failBroken(ctx, t.tx, t.l, cause, status)
}

// BufferedSignal is the oldest unconsumed signal of the run named name, locked until the
// commit; nil when there is none.
func (t runTx) BufferedSignal(ctx context.Context, name string) (*run.Signal, error) {
	var sig run.Signal
	err := t.tx.QueryRow(ctx, `SELECT id, name, payload FROM signals WHERE run_id = $1 AND name = $2 AND consumed_at IS NULL
		ORDER BY created_at, id LIMIT 1 FOR UPDATE`, t.l.run.ID, name).Scan(&sig.ID, &sig.Name, &sig.Payload)
	switch {
	case err == nil:
		return &sig, nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	default:
		return nil, err
	}
}

// after is what follows a commit that carried o: the run's changes are published, the
// timers of waits due soon armed.
func (s *RunStore) after(runID string, o *run.Outcome) {
	for _, w := range o.Armed {
		if !w.Wait.WakeAt.IsZero() {
			s.timers.Arm(runID, w.Block, w.Wait.WakeAt)
		}
	}
	if len(o.Changes) > 0 {
		s.events.Publish(o.Changes)
	}
}

// updateFunc decides, in the run's transaction, what happens to the locked run. l.broken set
// means the run cannot be read; l.run then holds only its identity and status.
type updateFunc func(ctx context.Context, tx pgx.Tx, l *Locked) (run.Outcome, error)

// update runs one transaction on run runID: lock, fn, writes, commit, then what follows the
// commit. With a job, the job must still hold the run (fenced off: fn is not called and
// nothing is written), and the transaction takes two round trips to Postgres: BEGIN travels
// with the lock and the reads, COMMIT with the writes (River's statements, and any fn runs
// itself, go at once). It ignores ctx's cancellation: a result is recorded even when the run
// was cancelled while its connector ran. A failed transaction empties c, whose run fn may
// have changed in memory; the run gone is run.ErrNotFound.
func (s *RunStore) update(ctx context.Context, runID string, job *engine.Job, c *Cache, fn updateFunc) (o run.Outcome, err error) {
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
