// Package engine is the durable runtime svc-runtime (ARCHITECTURE §4): River jobs in the
// orchestrator schema lease runs across replicas, and the run interpreter walks each run's
// pinned graph. An attempt row is committed before its connector runs; a result and the next
// step commit together; the worker that holds a run goes straight on to the next ready block
// without a queue hop. Waits complete the job and leave a row in waits, released by an
// in-process timer (rebuilt from the table at start and polled every second) or by a signal.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Schema is where River's tables and ours live.
const Schema = "orchestrator"

// maxAttemptsAnyKind stops a step after this many attempts of any kind (contract §3).
const maxAttemptsAnyKind = 10

// Config tunes the engine.
type Config struct {
	// Replica names this process in step_attempts.replica.
	Replica string
	// Workers is how many runs this replica drives at once.
	Workers int
	HTTP    HTTPConfig
	// Heartbeat is how often the replica refreshes its row in replicas (default 1 s);
	// DeadAfter how old a heartbeat makes a replica dead (default 5 s); SweepEvery how often
	// the replica looks for dead replicas' work (default: Heartbeat).
	Heartbeat, DeadAfter, SweepEvery time.Duration
}

// Engine drives runs.
type Engine struct {
	pool      *pgxpool.Pool
	river     *river.Client[pgx.Tx]
	log       *slog.Logger
	cfg       Config
	executors map[string]Executor
	catalog   map[string]connectors.Entry
	hidden    map[string]map[string]bool // x-expression params, kept raw
	progs     *programs
	timers    *timers

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc // run id → cancel of the attempt in flight here

	stopping chan struct{} // closed when Stop begins: workers hand runs back between steps
	stopOnce sync.Once
	bgCancel context.CancelFunc
	bgDone   chan struct{}
}

// runArgs is the one job kind: drive run RunID as far as it goes.
type runArgs struct {
	RunID string `json:"run_id"`
}

// Kind is the runtime workflow's name.
func (runArgs) Kind() string { return run.Spec }

// InsertOpts keeps a crash from ever discarding a run (ARCHITECTURE §4: at least 2).
func (runArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 25} }

type worker struct {
	river.WorkerDefaults[runArgs]
	e *Engine
}

// Timeout is off: steps carry their own timeouts, and a run may take long.
func (w *worker) Timeout(*river.Job[runArgs]) time.Duration { return -1 }

func (w *worker) Work(ctx context.Context, job *river.Job[runArgs]) error { return w.e.drive(ctx, job) }

// New migrates River's tables into the orchestrator schema (under an advisory lock, as goose
// migrations are) and builds the engine. It does not start working; Start does.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config, log *slog.Logger) (*Engine, error) {
	if err := migrateRiver(ctx, pool, log); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 100
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = DefaultDeadAfter
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = cfg.Heartbeat
	}
	if cfg.Replica == "" || len(cfg.Replica) > 100 {
		return nil, fmt.Errorf("engine: replica id must be 1 to 100 characters, got %q", cfg.Replica)
	}
	entries, err := connectors.Load()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		pool: pool, log: log, cfg: cfg, executors: Executors(log, cfg.HTTP),
		catalog: map[string]connectors.Entry{}, hidden: map[string]map[string]bool{},
		progs: newPrograms(), running: map[string]context.CancelCauseFunc{},
		stopping: make(chan struct{}), bgDone: make(chan struct{}),
	}
	for _, entry := range entries {
		e.catalog[entry.Type] = entry
		e.hidden[entry.Type] = expressionParams(entry)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{e: e}); err != nil {
		return nil, err
	}
	e.river, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: Schema,
		// River's client id is the replica id, so river_job.attempted_by names the replica
		// that holds a running job (the sweeper reads it).
		ID:                cfg.Replica,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		JobTimeout:        -1,
		Logger:            log.With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	e.timers = newTimers(e)
	return e, nil
}

func migrateRiver(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate river: acquire: %w", err)
	}
	defer conn.Release()
	lock := pgdb.LockID("migrate:" + Schema + ":river")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return fmt.Errorf("migrate river: lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock) }()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema, Logger: log})
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	for _, v := range res.Versions {
		log.InfoContext(ctx, "river migration applied", "schema", Schema, "version", v.Version)
	}
	return nil
}

func expressionParams(e connectors.Entry) map[string]bool {
	var s struct {
		Properties map[string]struct {
			Expr bool `json:"x-expression"`
		} `json:"properties"`
	}
	out := map[string]bool{}
	if json.Unmarshal(e.Params, &s) == nil {
		for k, p := range s.Properties {
			if p.Expr {
				out[k] = true
			}
		}
	}
	return out
}

// Start registers the replica (before it fetches any job, so its jobs are never taken for a
// dead replica's), starts the heartbeat and the sweeper, begins working jobs and arms the
// wait timers.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.heartbeat(ctx); err != nil {
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.bgCancel = cancel
	go func() {
		defer close(e.bgDone)
		e.background(bg)
	}()
	if err := e.river.Start(ctx); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	e.timers.start(ctx)
	return nil
}

// Replica is this process's replica id.
func (e *Engine) Replica() string { return e.cfg.Replica }

// Stop stops fetching new jobs; steps in flight finish and commit, and their workers hand the
// runs back (a fresh job) instead of going on to the next block; a retry backoff in progress
// is handed back at once, scheduled for its end. Then the replica deregisters: should a step
// outlast ctx, its attempt is marked lost by another replica's sweeper and the run continues
// there. Stop may be called more than once.
func (e *Engine) Stop(ctx context.Context) error {
	first := false
	e.stopOnce.Do(func() { first = true; close(e.stopping) })
	if !first {
		return nil
	}
	e.timers.stop()
	err := e.river.Stop(ctx)
	if e.bgCancel != nil {
		e.bgCancel()
		<-e.bgDone
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return errors.Join(err, e.deregister(dctx))
}

func (e *Engine) isStopping() bool {
	select {
	case <-e.stopping:
		return true
	default:
		return false
	}
}

// ---- dispatch --------------------------------------------------------------------------

var errDuplicateKey = errors.New("idempotency key already used")

// Dispatch stores the run, its idempotency record and its first job in one transaction.
func (e *Engine) Dispatch(ctx context.Context, r run.NewRun, key string) (string, bool, error) {
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO runs (id, organization_id, workflow_id, workflow_version, definition, input, status, trigger)
			VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7)`,
			r.ID, r.OrganizationID, r.WorkflowID, r.WorkflowVersion, string(r.Definition), string(r.Input), string(r.Trigger)); err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		if key != "" {
			// A key older than 24 h is taken over; a fresh one makes this dispatch a duplicate.
			var got string
			err := tx.QueryRow(ctx, `INSERT INTO idempotency_keys (organization_id, key, run_id) VALUES ($1, $2, $3)
				ON CONFLICT (organization_id, key) DO UPDATE SET run_id = excluded.run_id, created_at = now()
				WHERE idempotency_keys.created_at < now() - interval '24 hours'
				RETURNING run_id`, r.OrganizationID, key, r.ID).Scan(&got)
			if errors.Is(err, pgx.ErrNoRows) {
				return errDuplicateKey
			}
			if err != nil {
				return fmt.Errorf("insert idempotency key: %w", err)
			}
		}
		if _, err := e.river.InsertTx(ctx, tx, runArgs{RunID: r.ID}, nil); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		return nil
	})
	if errors.Is(err, errDuplicateKey) {
		id, err := e.RunForKey(ctx, r.OrganizationID, key)
		if err != nil || id == "" {
			return "", false, fmt.Errorf("read idempotency key: %w", errors.Join(err, errDuplicateKey))
		}
		return id, true, nil
	}
	if err != nil {
		return "", false, err
	}
	return r.ID, false, nil
}

// RunForKey returns the run an idempotency key of org names, if the key is under 24 h old.
func (e *Engine) RunForKey(ctx context.Context, org, key string) (string, error) {
	var id string
	err := e.pool.QueryRow(ctx, `SELECT run_id FROM idempotency_keys WHERE organization_id = $1 AND key = $2
		AND created_at >= now() - interval '24 hours'`, org, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// ---- the interpreter ----------------------------------------------------------------------

// loaded is a run locked for update within a transaction.
type loaded struct {
	id, org, workflowID string
	status              run.Status
	def                 run.Definition
	input               any
	inputRaw            json.RawMessage
	state               run.State
}

func (e *Engine) lockRun(ctx context.Context, tx pgx.Tx, id string) (*loaded, error) {
	var (
		l          loaded
		def, state []byte
	)
	err := tx.QueryRow(ctx, `SELECT id, organization_id, workflow_id, status, definition, input, state FROM runs WHERE id = $1 FOR UPDATE`, id).
		Scan(&l.id, &l.org, &l.workflowID, &l.status, &def, &l.inputRaw, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, run.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("lock run %s: %w", id, err)
	}
	if l.def, err = run.ParseDefinition(def); err != nil {
		return nil, err
	}
	if l.state, err = run.ParseState(state); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(l.inputRaw, &l.input); err != nil {
		return nil, fmt.Errorf("run input: %w", err)
	}
	return &l, nil
}

// save writes the interpreter state and status, moving the change sequence on when bump is
// set; it returns the run's change_seq afterwards.
func (e *Engine) save(ctx context.Context, tx pgx.Tx, l *loaded, bump bool) (int64, error) {
	state, err := json.Marshal(l.state)
	if err != nil {
		return 0, err
	}
	inc := 0
	if bump {
		inc = 1
	}
	var seq int64
	err = tx.QueryRow(ctx, `UPDATE runs SET state = $2, status = $3, change_seq = change_seq + $4, updated_at = now(),
		started_at = CASE WHEN $3 IN ('running', 'waiting') THEN coalesce(started_at, now()) ELSE started_at END
		WHERE id = $1 RETURNING change_seq`, l.id, string(state), string(l.status), inc).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("save run %s: %w", l.id, err)
	}
	return seq, nil
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

// drive runs the job's run until it finishes, suspends, or another worker holds its next
// block.
func (e *Engine) drive(ctx context.Context, job *river.Job[runArgs]) error {
	runID := job.Args.RunID
	runCtx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	e.running[runID] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.running, runID)
		e.mu.Unlock()
		cancel(nil)
	}()
	for {
		if e.isStopping() {
			// Graceful shutdown between steps: the run continues on another replica.
			return e.handBack(context.WithoutCancel(ctx), job, "", time.Time{})
		}
		st, err := e.next(runCtx, job)
		if err != nil || st == nil {
			return err
		}
		done, err := e.execute(runCtx, job, st)
		if err != nil || done {
			return err
		}
	}
}

// next picks the run's next ready block and commits its first attempt row, or finishes the run
// (completing the job in the same transaction) when nothing is left.
func (e *Engine) next(ctx context.Context, job *river.Job[runArgs]) (*step, error) {
	var out *step
	err := pgx.BeginFunc(context.WithoutCancel(ctx), e.pool, func(tx pgx.Tx) error {
		l, err := e.lockRun(ctx, tx, job.Args.RunID)
		if errors.Is(err, run.ErrNotFound) {
			return e.complete(ctx, tx, job)
		}
		if err != nil {
			return err
		}
		if gone, err := fenced(ctx, tx, job); err != nil || gone {
			return err // the sweeper took this run over: this worker writes nothing
		}
		if l.status.Terminal() {
			return e.complete(ctx, tx, job)
		}
		ready := l.state.Advance(l.def)
		if len(ready) == 0 {
			if l.state.Active() {
				// Another worker holds a block, or the run is suspended: this job is done.
				if l.state.Waiting() && !runningBlocks(l.state) {
					l.status = run.StatusWaiting
				}
				if _, err := e.save(ctx, tx, l, false); err != nil {
					return err
				}
				return e.complete(ctx, tx, job)
			}
			if err := e.finish(ctx, tx, l, run.StatusCompleted, nil); err != nil {
				return err
			}
			return e.complete(ctx, tx, job)
		}
		block, _ := l.def.Block(ready[0])
		bs := l.state.Block(block.ID)
		bs.Status = run.BlockRunning
		l.status = run.StatusRunning
		out = e.prepare(l, block, bs.Attempts+1)
		return e.beginAttempt(ctx, tx, l, out)
	})
	return out, err
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
func (e *Engine) prepare(l *loaded, block run.Block, attempt int) *step {
	steps := map[string]any{}
	for id, b := range l.state.Blocks {
		if b.Status == run.BlockSucceeded {
			var out any
			_ = json.Unmarshal(b.Output, &out)
			steps[id] = map[string]any{"output": out}
		}
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

// beginAttempt commits the attempt row (status running) with the run's next change sequence.
func (e *Engine) beginAttempt(ctx context.Context, tx pgx.Tx, l *loaded, st *step) error {
	l.state.Block(st.block.ID).Attempts = st.attempt
	seq, err := e.save(ctx, tx, l, true)
	if err != nil {
		return err
	}
	st.attemptID = wire.NewID(wire.Attempt)
	params, err := json.Marshal(st.params)
	if err != nil {
		return fmt.Errorf("attempt input: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, input, replica, seq, started_at)
		VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, now())`,
		st.attemptID, st.runID, st.block.ID, st.block.Type, st.attempt, string(params), e.cfg.Replica, seq)
	if err != nil {
		return fmt.Errorf("insert attempt: %w", err)
	}
	return nil
}

// execute runs attempts of one block until it succeeds, suspends or fails for good. done says
// the job is finished (run terminal or suspended).
func (e *Engine) execute(ctx context.Context, job *river.Job[runArgs], st *step) (bool, error) {
	entry := e.catalog[st.block.Type]
	for {
		res, execErr := e.call(ctx, entry, st)
		if execErr == nil && res.Wait != nil {
			return e.suspend(ctx, job, st, res.Wait)
		}
		var (
			retryIn time.Duration
			done    bool
		)
		// The result is recorded even when ctx was cancelled (a cancel of the run cancels the
		// connector's context): these writes must not inherit that cancellation.
		wctx := context.WithoutCancel(ctx)
		err := pgx.BeginFunc(wctx, e.pool, func(tx pgx.Tx) error {
			ctx := wctx
			l, err := e.lockRun(ctx, tx, st.runID)
			if err != nil {
				return err
			}
			if l.status.Terminal() {
				// Cancelled while the connector ran: the cancel already recorded the attempt
				// cancelled (and cancelled this job); the result is not applied.
				done = true
				return nil
			}
			if gone, err := fenced(ctx, tx, job); err != nil || gone {
				// This replica was taken for dead and its attempt marked lost: the result
				// is dropped, another replica runs the block.
				done = true
				return err
			}
			bs := l.state.Block(st.block.ID)
			if execErr == nil {
				out, err := json.Marshal(res.Output)
				if err != nil {
					return fmt.Errorf("output of %s: %w", st.block.ID, err)
				}
				bs.Status, bs.Output = run.BlockSucceeded, out
				return e.endAttempt(ctx, tx, l, st.attemptID, "succeeded", out, nil)
			}
			errBody := map[string]any{"message": execErr.Error()}
			if errors.Is(execErr, context.DeadlineExceeded) {
				errBody["code"] = "timeout"
			}
			// Lost attempts do not count against max_attempts; 10 of any kind stop the step.
			maxAttempts := entry.RetryPolicy.MaxAttempts
			if st.attempt-bs.Lost < maxAttempts && st.attempt < maxAttemptsAnyKind {
				retryIn = backoff(entry.RetryPolicy, st.attempt)
				return e.endAttempt(ctx, tx, l, st.attemptID, "failed", nil, errBody)
			}
			bs.Status = run.BlockFailed
			if err := e.endAttempt(ctx, tx, l, st.attemptID, "failed", nil, errBody); err != nil {
				return err
			}
			done = true
			if err := e.finish(ctx, tx, l, run.StatusFailed, map[string]any{"block_id": st.block.ID, "message": execErr.Error()}); err != nil {
				return err
			}
			return e.complete(ctx, tx, job)
		})
		if err != nil || done || retryIn == 0 {
			return done, err
		}
		// Retry after the policy's backoff. The worker keeps the run meanwhile; a cancel ends
		// the wait at once.
		retryAt := time.Now().Add(retryIn)
		select {
		case <-ctx.Done():
		case <-time.After(retryIn):
		case <-e.stopping:
			// Shutting down: the retry is handed back, due when the backoff ends.
			return true, e.handBack(context.WithoutCancel(ctx), job, st.block.ID, retryAt)
		}
		next := *st
		next.attempt++
		err = pgx.BeginFunc(context.WithoutCancel(ctx), e.pool, func(tx pgx.Tx) error {
			l, err := e.lockRun(ctx, tx, st.runID)
			if err != nil {
				return err
			}
			if gone, err := fenced(ctx, tx, job); err != nil || gone {
				done = true
				return err
			}
			if l.status.Terminal() {
				done = true
				return nil
			}
			return e.beginAttempt(ctx, tx, l, &next)
		})
		if err != nil || done {
			return done, err
		}
		st = &next
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

// endAttempt records an attempt's end with the run's next change sequence; it saves the run
// state (the caller has changed it) at the same time.
func (e *Engine) endAttempt(ctx context.Context, tx pgx.Tx, l *loaded, attemptID, status string, output json.RawMessage, errBody map[string]any) error {
	seq, err := e.save(ctx, tx, l, true)
	if err != nil {
		return err
	}
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
	_, err = tx.Exec(ctx, `UPDATE step_attempts SET status = $2, output = $3, error = $4, seq = $5, finished_at = now() WHERE id = $1`,
		attemptID, status, outJSON, errJSON, seq)
	if err != nil {
		return fmt.Errorf("end attempt: %w", err)
	}
	return nil
}

// finish moves the run to a terminal status.
func (e *Engine) finish(ctx context.Context, tx pgx.Tx, l *loaded, status run.Status, runErr map[string]any) error {
	l.status = status
	if _, err := e.save(ctx, tx, l, false); err != nil {
		return err
	}
	var output, errJSON *string
	if status == run.StatusCompleted {
		b, err := json.Marshal(l.state.Output(l.def))
		if err != nil {
			return err
		}
		s := string(b)
		output = &s
	}
	if runErr != nil {
		b, _ := json.Marshal(runErr)
		s := string(b)
		errJSON = &s
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET output = $2, error = $3, finished_at = now(), started_at = coalesce(started_at, now()) WHERE id = $1`, l.id, output, errJSON)
	if err != nil {
		return fmt.Errorf("finish run: %w", err)
	}
	_, err = tx.Exec(ctx, `DELETE FROM waits WHERE run_id = $1`, l.id)
	return err
}

// complete marks the job completed inside tx.
func (e *Engine) complete(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs]) error {
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete job: %w", err)
	}
	return nil
}

// ---- waits ---------------------------------------------------------------------------------

// suspend parks the block in a wait (or consumes a buffered signal at once) and completes the
// job when the run is suspended.
func (e *Engine) suspend(ctx context.Context, job *river.Job[runArgs], st *step, w *WaitSpec) (bool, error) {
	done := false
	var wakeAt time.Time
	err := pgx.BeginFunc(context.WithoutCancel(ctx), e.pool, func(tx pgx.Tx) error {
		l, err := e.lockRun(ctx, tx, st.runID)
		if err != nil {
			return err
		}
		if gone, err := fenced(ctx, tx, job); err != nil || gone {
			done = true
			return err
		}
		if l.status.Terminal() {
			done = true
			return e.endAttempt(ctx, tx, l, st.attemptID, "cancelled", nil, map[string]any{"message": "run " + string(l.status)})
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
				return e.endAttempt(ctx, tx, l, st.attemptID, "succeeded", out, nil)
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
		if _, err := tx.Exec(ctx, `INSERT INTO waits (run_id, block_id, kind, signal_name, wake_at, attempt_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			st.runID, st.block.ID, w.Kind, sig, wake, st.attemptID); err != nil {
			return fmt.Errorf("insert wait: %w", err)
		}
		bs.Status = run.BlockWaiting
		if !runningBlocks(l.state) && len(l.state.Advance(l.def)) == 0 {
			l.status = run.StatusWaiting
		}
		if _, err := e.save(ctx, tx, l, false); err != nil {
			return err
		}
		if l.status == run.StatusWaiting {
			done = true
			return e.complete(ctx, tx, job)
		}
		return nil
	})
	if err == nil && !wakeAt.IsZero() {
		e.timers.arm(st.runID, st.block.ID, wakeAt)
	}
	return done, err
}

func signalOutput(name string, payload []byte) json.RawMessage {
	var p any
	if len(payload) > 0 {
		_ = json.Unmarshal(payload, &p)
	}
	out, _ := json.Marshal(map[string]any{"signal": map[string]any{"name": name, "payload": p}})
	return out
}

// release ends a wait of (runID, blockID) with output, if it is still there, and enqueues the
// run. Whoever deletes the waits row first (timer, signal, another replica) wins.
func (e *Engine) release(ctx context.Context, tx pgx.Tx, l *loaded, blockID string, output func(kind string, since time.Time) json.RawMessage) (bool, error) {
	var (
		kind, attemptID string
		since           time.Time
	)
	err := tx.QueryRow(ctx, `DELETE FROM waits WHERE run_id = $1 AND block_id = $2 RETURNING kind, attempt_id, created_at`, l.id, blockID).
		Scan(&kind, &attemptID, &since)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete wait: %w", err)
	}
	out := output(kind, since)
	bs := l.state.Block(blockID)
	bs.Status, bs.Output = run.BlockSucceeded, out
	l.status = run.StatusRunning
	if err := e.endAttempt(ctx, tx, l, attemptID, "succeeded", out, nil); err != nil {
		return false, err
	}
	if _, err := e.river.InsertTx(ctx, tx, runArgs{RunID: l.id}, nil); err != nil {
		return false, fmt.Errorf("insert job: %w", err)
	}
	return true, nil
}

// wake is a timer's end: a sleep is over, or a signal wait timed out.
func (e *Engine) wake(ctx context.Context, runID, blockID string) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		l, err := e.lockRun(ctx, tx, runID)
		if errors.Is(err, run.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if l.status.Terminal() {
			return nil
		}
		_, err = e.release(ctx, tx, l, blockID, func(kind string, since time.Time) json.RawMessage {
			if kind == "signal" {
				return json.RawMessage(`{"timed_out":true}`)
			}
			out, _ := json.Marshal(map[string]any{"slept_ms": time.Since(since).Milliseconds()})
			return out
		})
		return err
	})
}

// ---- signals and cancel ----------------------------------------------------------------

// Signal stores a signal; a wait on its name consumes it at once and the run wakes.
func (e *Engine) Signal(ctx context.Context, org, runID, name string, payload json.RawMessage) (string, bool, error) {
	sigID := wire.NewID(wire.Signal)
	delivered := false
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		l, err := e.lockOwned(ctx, tx, org, runID)
		if err != nil {
			return err
		}
		if l.status.Terminal() {
			return &run.FinishedError{Status: l.status}
		}
		var p *string
		if len(payload) > 0 {
			s := string(payload)
			p = &s
		}
		if _, err := tx.Exec(ctx, `INSERT INTO signals (id, run_id, name, payload) VALUES ($1, $2, $3, $4)`, sigID, runID, name, p); err != nil {
			return fmt.Errorf("insert signal: %w", err)
		}
		var blockID string
		err = tx.QueryRow(ctx, `SELECT block_id FROM waits WHERE run_id = $1 AND kind = 'signal' AND signal_name = $2 ORDER BY created_at LIMIT 1`, runID, name).Scan(&blockID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find wait: %w", err)
		}
		delivered, err = e.release(ctx, tx, l, blockID, func(string, time.Time) json.RawMessage { return signalOutput(name, payload) })
		if err != nil || !delivered {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE signals SET consumed_by = (SELECT id FROM step_attempts WHERE run_id = $1 AND block_id = $3 ORDER BY attempt DESC LIMIT 1),
			consumed_at = now() WHERE id = $2`, runID, sigID, blockID)
		return err
	})
	if err != nil {
		return "", false, err
	}
	return sigID, delivered, nil
}

func (e *Engine) lockOwned(ctx context.Context, tx pgx.Tx, org, runID string) (*loaded, error) {
	l, err := e.lockRun(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	if l.org != org {
		return nil, run.ErrNotFound
	}
	return l, nil
}

// Cancel marks the run cancelled, ends its waits, cancels its jobs and the attempt in flight.
func (e *Engine) Cancel(ctx context.Context, org, runID string) (run.Status, error) {
	var status run.Status
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		l, err := e.lockOwned(ctx, tx, org, runID)
		if err != nil {
			return err
		}
		switch l.status {
		case run.StatusCancelled:
			status = l.status
			return nil
		case run.StatusCompleted, run.StatusFailed:
			return &run.FinishedError{Status: l.status}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM waits WHERE run_id = $1`, runID); err != nil {
			return fmt.Errorf("delete waits: %w", err)
		}
		// Every attempt still running — a wait's, or a step in flight on any replica — is
		// recorded cancelled here, in the cancel's own commit; the replica running a step
		// drops its result when it finds the run terminal.
		rows, err := tx.Query(ctx, `SELECT id FROM step_attempts WHERE run_id = $1 AND status = 'running'`, runID)
		if err != nil {
			return fmt.Errorf("running attempts: %w", err)
		}
		attempts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, a := range attempts {
			if err := e.endAttempt(ctx, tx, l, a, "cancelled", nil, map[string]any{"message": "run cancelled"}); err != nil {
				return err
			}
		}
		if err := e.finish(ctx, tx, l, run.StatusCancelled, nil); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT id FROM river_job WHERE kind = $1 AND args->>'run_id' = $2
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, run.Spec, runID)
		if err != nil {
			return fmt.Errorf("find jobs: %w", err)
		}
		jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if _, err := e.river.JobCancelTx(ctx, tx, j); err != nil && !errors.Is(err, river.ErrNotFound) {
				return fmt.Errorf("cancel job %d: %w", j, err)
			}
		}
		status = run.StatusCancelled
		return nil
	})
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	if c, ok := e.running[runID]; ok {
		c(errors.New("run cancelled"))
	}
	e.mu.Unlock()
	return status, nil
}
