package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The interpreter. A worker holding a run's job commits, per block, one transaction that
// records the block's result and starts the next block's attempt: the attempt row is durable
// before the connector runs, and no queue hop separates consecutive blocks. Blocks that become
// ready together get a job each, so other workers (on any replica) run them in parallel.

// loaded is a run locked for update within a transaction.
type loaded struct {
	id, org, workflowID string
	status              run.Status
	def                 run.Definition
	input               any
	state               run.State
	// seq is the run's change sequence: every logged change takes the next value, and save
	// stores the last one.
	seq int64
	// stateRev is runs.state_rev as locked; save stores the next one (the row lock makes the
	// arithmetic safe).
	stateRev int64
	// batch, when set, collects the transaction's writes, sent together before the commit
	// (one round trip instead of one per statement); a run locked by lockRun writes at once.
	batch *pgx.Batch
	// broken is why the stored run cannot be read (its definition, state or input): such a
	// run can still be cancelled or failed, never advanced. rawState is the state as stored,
	// written back unchanged while broken is set.
	broken   error
	rawState []byte
}

// exec runs a write now, or queues it in l's batch.
func (l *loaded) exec(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	if l.batch != nil {
		l.batch.Queue(sql, args...)
		return nil
	}
	_, err := tx.Exec(ctx, sql, args...)
	return err
}

// nextSeq is the change sequence of the next logged change.
func (l *loaded) nextSeq() int64 {
	l.seq++
	return l.seq
}

// lockRun locks a run for update and reads all of it. A run whose stored parts cannot be read
// comes back with broken set (not as an error), so that it can still be cancelled or failed.
func (e *Engine) lockRun(ctx context.Context, tx pgx.Tx, id string) (*loaded, error) {
	var (
		l          loaded
		def, state []byte
		inputRaw   []byte
	)
	err := tx.QueryRow(ctx, `SELECT id, organization_id, workflow_id, status, definition, input, state, change_seq, state_rev FROM runs WHERE id = $1 FOR UPDATE`, id).
		Scan(&l.id, &l.org, &l.workflowID, &l.status, &def, &inputRaw, &state, &l.seq, &l.stateRev)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, run.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("lock run %s: %w", id, err)
	}
	l.rawState = state
	if l.def, err = run.ParseDefinition(def); err != nil {
		l.broken = err
	} else if l.state, err = run.ParseState(state); err != nil {
		l.broken = err
	} else if err := json.Unmarshal(inputRaw, &l.input); err != nil {
		l.broken = inputError(inputRaw, err)
	}
	if l.broken != nil {
		l.state = run.State{Blocks: map[string]*run.BlockState{}}
	}
	return &l, nil
}

// runCache is what a worker keeps of its run between its transactions: the parts that never
// change (definition, input) parsed once, the state as last read or written with its
// revision, and the parsed outputs of the blocks that succeeded, for templates.
type runCache struct {
	filled          bool
	org, workflowID string
	def             run.Definition
	input           any
	state           run.State
	stateRev        int64 // runs.state_rev of state; -1: state must be read
	outputs         map[string]any
}

func newRunCache() *runCache { return &runCache{stateRev: -1, outputs: map[string]any{}} }

// lockRow receives the run's row as locked for a job's transaction.
type lockRow struct {
	status            run.Status
	seq, stateRev     int64
	state             []byte
	jobState          *string
	org, workflowID   string
	definition, input []byte
}

// queueLock queues the statement that locks the run of job for update, reading only what
// changed since the worker's last transaction, and checks in the same statement that the job
// still holds the run (it is still running in River's table: the sweeper finalizes a dead
// replica's job under the same row lock).
func queueLock(b *pgx.Batch, job *river.Job[runArgs], c *runCache, dst *lockRow) {
	if c.filled {
		b.Queue(`SELECT r.status, r.change_seq, r.state_rev, CASE WHEN r.state_rev = $3 THEN NULL ELSE r.state END,
				(SELECT j.state::text FROM river_job j WHERE j.id = $2)
			FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, job.Args.RunID, job.ID, c.stateRev).
			QueryRow(func(row pgx.Row) error {
				return row.Scan(&dst.status, &dst.seq, &dst.stateRev, &dst.state, &dst.jobState)
			})
		return
	}
	b.Queue(`SELECT r.status, r.change_seq, r.state_rev, r.state,
			(SELECT j.state::text FROM river_job j WHERE j.id = $2),
			r.organization_id, r.workflow_id, r.definition, r.input
		FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, job.Args.RunID, job.ID).
		QueryRow(func(row pgx.Row) error {
			return row.Scan(&dst.status, &dst.seq, &dst.stateRev, &dst.state, &dst.jobState,
				&dst.org, &dst.workflowID, &dst.definition, &dst.input)
		})
}

// loaded turns the locked row into the run, through the worker's cache. It returns nil when
// the job was fenced off.
func (r *lockRow) loaded(job *river.Job[runArgs], c *runCache) (*loaded, error) {
	if !c.filled {
		def, err := run.ParseDefinition(r.definition)
		if err != nil {
			return nil, &brokenRunError{err}
		}
		var input any
		if err := json.Unmarshal(r.input, &input); err != nil {
			return nil, &brokenRunError{inputError(r.input, err)}
		}
		c.org, c.workflowID, c.def, c.input, c.filled = r.org, r.workflowID, def, input, true
	}
	if r.jobState == nil || *r.jobState != string(rivertype.JobStateRunning) {
		return nil, nil // the sweeper took this run over: this worker writes nothing
	}
	if r.stateRev != c.stateRev || r.state != nil {
		st, err := run.ParseState(r.state)
		if err != nil {
			return nil, &brokenRunError{err}
		}
		c.state, c.stateRev = st, r.stateRev
	}
	return &loaded{
		id: job.Args.RunID, org: c.org, workflowID: c.workflowID, status: r.status, def: c.def, input: c.input,
		state: c.state, seq: r.seq, stateRev: r.stateRev, batch: &pgx.Batch{},
	}, nil
}

// save writes the run's interpreter state, status and change sequence, and finishes it when
// finished is set. It moves the state revision on, which tells workers their cached state is
// stale.
func (e *Engine) save(ctx context.Context, tx pgx.Tx, l *loaded) (int64, error) {
	return e.write(ctx, tx, l, nil)
}

// finished is a terminal run's output and error, as save stores them.
type finished struct{ output, err *string }

func (e *Engine) write(ctx context.Context, tx pgx.Tx, l *loaded, fin *finished) (int64, error) {
	state, err := json.Marshal(l.state)
	if l.broken != nil {
		state, err = l.rawState, nil
	}
	if err != nil {
		return 0, err
	}
	rev := l.stateRev + 1
	if fin == nil {
		err = l.exec(ctx, tx, `UPDATE runs SET state = $2, status = $3, change_seq = $4, state_rev = $5, updated_at = now(),
			started_at = CASE WHEN $3 IN ('running', 'waiting') THEN coalesce(started_at, now()) ELSE started_at END
			WHERE id = $1`, l.id, string(state), string(l.status), l.seq, rev)
	} else {
		err = l.exec(ctx, tx, `UPDATE runs SET state = $2, status = $3, change_seq = $4, state_rev = $5, updated_at = now(),
			output = $6, error = $7, finished_at = now(), started_at = coalesce(started_at, now())
			WHERE id = $1`, l.id, string(state), string(l.status), l.seq, rev, fin.output, fin.err)
	}
	if err != nil {
		return 0, fmt.Errorf("save run %s: %w", l.id, err)
	}
	l.stateRev = rev
	return rev, nil
}

// saveCached saves l and records the write in the worker's cache.
func (e *Engine) saveCached(ctx context.Context, tx pgx.Tx, l *loaded, c *runCache) error {
	rev, err := e.save(ctx, tx, l)
	if err != nil {
		return err
	}
	c.state, c.stateRev = l.state, rev
	return nil
}

// step is one attempt about to run.
type step struct {
	runID, workflowID, attemptID string
	block                        run.Block
	attempt                      int
	params                       map[string]any
	input                        any
	scope                        map[string]any
	paramErr                     error
}

// drive runs the job's run until it finishes, suspends, or other workers hold its remaining
// blocks.
func (e *Engine) drive(ctx context.Context, job *river.Job[runArgs]) (err error) {
	runID := job.Args.RunID
	if e.propagator != nil && len(job.Args.Trace) > 0 {
		ctx = e.propagator.Extract(ctx, propagation.MapCarrier(job.Args.Trace))
	}
	ctx, span := e.tracer.Start(ctx, "svc-runtime drive", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("run.id", runID), attribute.Int64("river.job.id", job.ID), attribute.Int("river.job.attempt", job.Attempt)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	runCtx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	if e.running[runID] == nil {
		e.running[runID] = map[int64]context.CancelCauseFunc{}
	}
	e.running[runID][job.ID] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.running[runID], job.ID)
		if len(e.running[runID]) == 0 {
			delete(e.running, runID)
		}
		e.mu.Unlock()
		cancel(nil)
	}()
	c := newRunCache()
	var st *step
	err = e.inJobTx(runCtx, job, c, func(ctx context.Context, tx pgx.Tx, l *loaded) error {
		if l == nil {
			return nil
		}
		if l.status.Terminal() {
			return e.complete(ctx, tx, job)
		}
		if job.Attempt > 1 {
			if err := e.reclaim(ctx, tx, job, l); err != nil {
				return err
			}
			if l.status.Terminal() {
				return e.complete(ctx, tx, job)
			}
		}
		var err error
		st, err = e.proceed(ctx, tx, job, l, c)
		return err
	})
	if errors.Is(err, run.ErrNotFound) {
		// No such run (it cannot be deleted today): the job has nothing to drive.
		return pgx.BeginFunc(context.WithoutCancel(ctx), e.pool, func(tx pgx.Tx) error { return e.complete(ctx, tx, job) })
	}
	for err == nil && st != nil {
		st, err = e.execute(runCtx, job, st, c)
	}
	if broken := (*brokenRunError)(nil); errors.As(err, &broken) {
		return e.failJob(context.WithoutCancel(ctx), job, broken.err)
	}
	return err
}

// inJobTx runs fn in a transaction on the run of job, locked for update (l is nil when the
// job was fenced off: fn must write nothing). The transaction takes two round trips to
// Postgres: BEGIN travels with the lock, and COMMIT with the writes fn queued in l's batch
// (statements fn runs itself, River's included, go at once). It ignores ctx's cancellation:
// a result is recorded even when the run was cancelled while its connector ran. A failed
// transaction empties the worker's cache of the run's state, which fn may have changed in
// memory; the run gone is run.ErrNotFound.
func (e *Engine) inJobTx(ctx context.Context, job *river.Job[runArgs], c *runCache, fn func(ctx context.Context, tx pgx.Tx, l *loaded) error) (err error) {
	ctx = context.WithoutCancel(ctx)
	defer func() {
		if err != nil {
			c.stateRev = -1
		}
	}()
	pc, err := e.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	// Release destroys a connection left inside a transaction rather than reuse it.
	defer pc.Release()
	conn := pc.Conn()
	lock := &pgx.Batch{}
	lock.Queue("BEGIN")
	var row lockRow
	queueLock(lock, job, c, &row)
	if err := conn.SendBatch(ctx, lock).Close(); err != nil {
		rollback(ctx, conn)
		if errors.Is(err, pgx.ErrNoRows) {
			return run.ErrNotFound
		}
		return fmt.Errorf("lock run %s: %w", job.Args.RunID, err)
	}
	l, err := row.loaded(job, c)
	if err == nil {
		err = fn(ctx, connTx{conn}, l)
	}
	if err != nil {
		rollback(ctx, conn)
		return err
	}
	writes := &pgx.Batch{}
	if l != nil {
		writes = l.batch
	}
	writes.Queue("COMMIT")
	if err := conn.SendBatch(ctx, writes).Close(); err != nil {
		rollback(ctx, conn)
		return fmt.Errorf("write run %s: %w", job.Args.RunID, err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' {
		rollback(ctx, conn)
		return fmt.Errorf("write run %s: the commit left the connection in transaction state %q", job.Args.RunID, st)
	}
	return nil
}

// proceed decides what the run does next, in the transaction that locked it (l is not
// terminal): it starts the attempt of the next ready block and returns it, giving each other
// ready block a job of its own; or, with nothing ready, it finishes the run or leaves it to
// the workers of its running blocks and its waits, completing this job. The run is saved.
func (e *Engine) proceed(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs], l *loaded, c *runCache) (*step, error) {
	if e.isStopping() {
		// Graceful shutdown between steps: the run continues from a fresh job, here or on
		// another replica.
		if err := e.saveCached(ctx, tx, l, c); err != nil {
			return nil, err
		}
		if _, err := e.river.InsertTx(ctx, tx, e.args(ctx, l.id), nil); err != nil {
			return nil, fmt.Errorf("insert job: %w", err)
		}
		return nil, e.complete(ctx, tx, job)
	}
	ready := l.state.Advance(l.def)
	if len(ready) == 0 {
		if !l.state.Active() {
			if err := e.finish(ctx, tx, l, run.StatusCompleted, nil); err != nil {
				return nil, err
			}
			return nil, e.complete(ctx, tx, job)
		}
		// Other workers hold blocks, or the run is suspended: this job is done.
		if l.state.Waiting() && !runningBlocks(l.state) {
			l.status = run.StatusWaiting
		}
		if err := e.saveCached(ctx, tx, l, c); err != nil {
			return nil, err
		}
		return nil, e.complete(ctx, tx, job)
	}
	if len(ready) > 1 {
		// Parallel branches: one job per other ready block. A job that finds its block taken
		// by then (this worker may get to it first) finds nothing to do and completes.
		params := make([]river.InsertManyParams, 0, len(ready)-1)
		for range ready[1:] {
			params = append(params, river.InsertManyParams{Args: e.args(ctx, l.id)})
		}
		if _, err := e.river.InsertManyTx(ctx, tx, params); err != nil {
			return nil, fmt.Errorf("insert jobs of parallel blocks: %w", err)
		}
	}
	block, _ := l.def.Block(ready[0])
	bs := l.state.Block(block.ID)
	bs.Status, bs.Job = run.BlockRunning, job.ID
	l.status = run.StatusRunning
	st := e.prepare(l, c, block, bs.Attempts+1)
	if err := e.beginAttempt(ctx, tx, l, st); err != nil {
		return nil, err
	}
	return st, e.saveCached(ctx, tx, l, c)
}

func runningBlocks(s run.State) bool {
	for _, b := range s.Blocks {
		if b.Status == run.BlockRunning {
			return true
		}
	}
	return false
}

// prepare resolves the block's params against the run's scope.
func (e *Engine) prepare(l *loaded, c *runCache, block run.Block, attempt int) *step {
	steps := make(map[string]any, len(l.state.Blocks))
	for id, b := range l.state.Blocks {
		if b.Status != run.BlockSucceeded {
			continue
		}
		out, ok := c.outputs[id]
		if !ok {
			_ = json.Unmarshal(b.Output, &out)
			c.outputs[id] = out
		}
		steps[id] = map[string]any{"output": out}
	}
	scope := map[string]any{
		"input": l.input, "steps": steps,
		"run": map[string]any{"id": l.id}, "workflow": map[string]any{"id": l.workflowID},
	}
	st := &step{runID: l.id, workflowID: l.workflowID, block: block, attempt: attempt, input: l.input, scope: scope, params: map[string]any{}}
	raw := e.hidden[block.Type]
	for k, v := range block.Params {
		if raw[k] || (block.Type == "trigger.manual" && k == "input_schema") {
			st.params[k] = v
			continue
		}
		r, err := e.progs.resolve(v, scope)
		if err != nil && st.paramErr == nil {
			st.paramErr = fmt.Errorf("param %s: %w", k, err)
		}
		st.params[k] = r
	}
	if block.Type == "http.request" && e.cfg.HTTP.AllowPrivate {
		st.params["allow_private_network"] = true
	}
	return st
}

// beginAttempt inserts the attempt row (status running) with the run's next change sequence.
// The caller saves the run.
func (e *Engine) beginAttempt(ctx context.Context, tx pgx.Tx, l *loaded, st *step) error {
	l.state.Block(st.block.ID).Attempts = st.attempt
	seq := l.nextSeq()
	st.attemptID = wire.NewID(wire.Attempt)
	params, err := json.Marshal(st.params)
	if err != nil {
		return fmt.Errorf("attempt input: %w", err)
	}
	err = l.exec(ctx, tx, `INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, input, replica, seq, started_at)
		VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, now())`,
		st.attemptID, st.runID, st.block.ID, st.block.Type, st.attempt, string(params), e.cfg.Replica, seq)
	if err != nil {
		return fmt.Errorf("insert attempt: %w", err)
	}
	return nil
}

// execute runs attempts of one block until it succeeds, suspends or fails for good, and
// returns the next step this worker runs (nil: the job is finished).
func (e *Engine) execute(ctx context.Context, job *river.Job[runArgs], st *step, c *runCache) (*step, error) {
	entry := e.catalog[st.block.Type]
	for {
		sctx, span := e.tracer.Start(ctx, "step "+st.block.Type, trace.WithAttributes(attribute.String("run.id", st.runID),
			attribute.String("block.id", st.block.ID), attribute.Int("attempt", st.attempt), attribute.String("attempt.id", st.attemptID)))
		res, execErr := e.call(sctx, entry, st)
		if execErr != nil {
			span.RecordError(execErr)
			span.SetStatus(codes.Error, execErr.Error())
		}
		span.End()
		if execErr == nil && res.Wait != nil {
			return e.suspend(ctx, job, st, res.Wait, c)
		}
		var (
			retryIn time.Duration
			next    *step
		)
		err := e.inJobTx(ctx, job, c, func(ctx context.Context, tx pgx.Tx, l *loaded) error {
			if l == nil {
				// This replica was taken for dead and its attempt marked lost: the result is
				// dropped, another replica runs the block.
				return nil
			}
			if l.status.Terminal() {
				// Cancelled while the connector ran: the cancel already recorded the attempt
				// cancelled (and cancelled this job); the result is not applied.
				return nil
			}
			bs := l.state.Block(st.block.ID)
			if execErr == nil {
				out, err := json.Marshal(res.Output)
				if err != nil {
					return fmt.Errorf("output of %s: %w", st.block.ID, err)
				}
				bs.Status, bs.Output = run.BlockSucceeded, out
				if err := e.endAttempt(ctx, tx, l, st.attemptID, "succeeded", out, nil); err != nil {
					return err
				}
				next, err = e.proceed(ctx, tx, job, l, c)
				return err
			}
			errBody := map[string]any{"message": execErr.Error()}
			if errors.Is(execErr, context.DeadlineExceeded) {
				errBody["code"] = "timeout"
			}
			if err := e.endAttempt(ctx, tx, l, st.attemptID, "failed", nil, errBody); err != nil {
				return err
			}
			// Lost attempts do not count against max_attempts; 10 of any kind stop the step.
			if st.attempt-bs.Lost < entry.RetryPolicy.MaxAttempts && st.attempt < maxAttemptsAnyKind {
				retryIn = backoff(entry.RetryPolicy, st.attempt)
				return e.saveCached(ctx, tx, l, c)
			}
			bs.Status = run.BlockFailed
			if err := e.finish(ctx, tx, l, run.StatusFailed, map[string]any{"block_id": st.block.ID, "message": execErr.Error()}); err != nil {
				return err
			}
			return e.complete(ctx, tx, job)
		})
		if err != nil || retryIn == 0 {
			return next, err
		}
		// Retry after the policy's backoff. The worker keeps the run meanwhile; a cancel ends
		// the wait at once.
		retryAt := time.Now().Add(retryIn)
		timer := time.NewTimer(retryIn)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-e.stopping:
			timer.Stop()
			// Shutting down: the retry is handed back, due when the backoff ends.
			return nil, e.handBack(context.WithoutCancel(ctx), job, st.block.ID, retryAt)
		}
		timer.Stop()
		again := *st
		again.attempt++
		stop := false
		err = e.inJobTx(ctx, job, c, func(ctx context.Context, tx pgx.Tx, l *loaded) error {
			if l == nil || l.status.Terminal() {
				stop = true
				return nil
			}
			if err := e.beginAttempt(ctx, tx, l, &again); err != nil {
				return err
			}
			return e.saveCached(ctx, tx, l, c)
		})
		if err != nil || stop {
			return nil, err
		}
		st = &again
	}
}

// call runs the executor under the step's timeout.
func (e *Engine) call(ctx context.Context, entry connectors.Entry, st *step) (Result, error) {
	if st.paramErr != nil {
		return Result{}, st.paramErr
	}
	ex, ok := e.executors[st.block.Type]
	if !ok {
		return Result{}, fmt.Errorf("no executor for block type %s", st.block.Type)
	}
	timeout := time.Duration(entry.TimeoutMS) * time.Millisecond
	if ms, ok := intParam(st.params["timeout_ms"]); ok && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return ex.Execute(cctx, Call{RunID: st.runID, BlockID: st.block.ID, Attempt: st.attempt, Params: st.params,
		Input: st.input, Scope: st.scope, eval: e.progs.eval})
}

// backoff is the delay before attempt n+1 after attempt n failed.
func backoff(p connectors.RetryPolicy, n int) time.Duration {
	ms := float64(p.InitialIntervalMS) * math.Pow(p.BackoffCoefficient, float64(n-1))
	if p.MaxIntervalMS > 0 && ms > float64(p.MaxIntervalMS) {
		ms = float64(p.MaxIntervalMS)
	}
	if ms < 1 {
		ms = 1
	}
	return time.Duration(ms) * time.Millisecond
}

// endAttempt records an attempt's end with the run's next change sequence. The caller saves
// the run (whose state it has changed) in the same transaction.
func (e *Engine) endAttempt(ctx context.Context, tx pgx.Tx, l *loaded, attemptID, status string, output json.RawMessage, errBody map[string]any) error {
	seq := l.nextSeq()
	var errJSON, outJSON *string
	if errBody != nil {
		b, _ := json.Marshal(errBody)
		s := string(b)
		errJSON = &s
	}
	if output != nil {
		s := string(output)
		outJSON = &s
	}
	err := l.exec(ctx, tx, `UPDATE step_attempts SET status = $2, output = $3, error = $4, seq = $5, finished_at = now() WHERE id = $1`,
		attemptID, status, outJSON, errJSON, seq)
	if err != nil {
		return fmt.Errorf("end attempt: %w", err)
	}
	return nil
}

// finish moves the run to a terminal status and saves it.
func (e *Engine) finish(ctx context.Context, tx pgx.Tx, l *loaded, status run.Status, runErr map[string]any) error {
	l.status = status
	var fin finished
	if status == run.StatusCompleted {
		b, err := json.Marshal(l.state.Output(l.def))
		if err != nil {
			return err
		}
		s := string(b)
		fin.output = &s
	}
	if runErr != nil {
		b, _ := json.Marshal(runErr)
		s := string(b)
		fin.err = &s
	}
	if _, err := e.write(ctx, tx, l, &fin); err != nil {
		return err
	}
	return l.exec(ctx, tx, `DELETE FROM waits WHERE run_id = $1`, l.id)
}

// complete marks the job completed inside tx.
func (e *Engine) complete(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs]) error {
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete job: %w", err)
	}
	return nil
}

// ---- waits ---------------------------------------------------------------------------------

// suspend parks the block in a wait, or consumes a buffered signal at once, and goes on with
// whatever else is ready; the job completes when the run is suspended.
func (e *Engine) suspend(ctx context.Context, job *river.Job[runArgs], st *step, w *WaitSpec, c *runCache) (*step, error) {
	var (
		wakeAt time.Time
		next   *step
	)
	err := e.inJobTx(ctx, job, c, func(ctx context.Context, tx pgx.Tx, l *loaded) error {
		if l == nil {
			return nil
		}
		if l.status.Terminal() {
			if err := e.endAttempt(ctx, tx, l, st.attemptID, "cancelled", nil, map[string]any{"message": "run " + string(l.status)}); err != nil {
				return err
			}
			return e.saveCached(ctx, tx, l, c)
		}
		bs := l.state.Block(st.block.ID)
		if w.Kind == "signal" {
			var payload []byte
			err := tx.QueryRow(ctx, `UPDATE signals SET consumed_by = $3, consumed_at = now() WHERE id = (
				SELECT id FROM signals WHERE run_id = $1 AND name = $2 AND consumed_at IS NULL ORDER BY created_at, id LIMIT 1 FOR UPDATE)
				RETURNING payload`, st.runID, w.Signal, st.attemptID).Scan(&payload)
			if err == nil {
				out := signalOutput(w.Signal, payload)
				bs.Status, bs.Output = run.BlockSucceeded, out
				if err := e.endAttempt(ctx, tx, l, st.attemptID, "succeeded", out, nil); err != nil {
					return err
				}
				next, err = e.proceed(ctx, tx, job, l, c)
				return err
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("consume signal: %w", err)
			}
			if w.Timeout > 0 {
				wakeAt = time.Now().Add(w.Timeout)
			}
		} else {
			wakeAt = w.WakeAt
		}
		var wake *time.Time
		if !wakeAt.IsZero() {
			wake = &wakeAt
		}
		var sig *string
		if w.Kind == "signal" {
			sig = &w.Signal
		}
		if err := l.exec(ctx, tx, `INSERT INTO waits (run_id, block_id, kind, signal_name, wake_at, attempt_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			st.runID, st.block.ID, w.Kind, sig, wake, st.attemptID); err != nil {
			return fmt.Errorf("insert wait: %w", err)
		}
		bs.Status = run.BlockWaiting
		var err error
		next, err = e.proceed(ctx, tx, job, l, c)
		return err
	})
	if err == nil && !wakeAt.IsZero() {
		e.timers.arm(st.runID, st.block.ID, wakeAt)
	}
	return next, err
}
