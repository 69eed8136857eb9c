// Package engine is the durable runtime svc-runtime (ARCHITECTURE §4): River jobs in the
// orchestrator schema lease runs across replicas, and the run interpreter walks each run's
// pinned graph. An attempt row is committed before its connector runs; a result and the next
// step commit together; the worker that holds a run goes straight on to the next ready block
// without a queue hop. Waits complete the job and leave a row in waits, released by an
// in-process timer (rebuilt from the table at start and polled every second) or by a signal.
package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

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
	// Tracer and Propagator trace the runs' steps (nil: not traced).
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
	// Heartbeat is how often the replica refreshes its row in replicas (default 1 s);
	// DeadAfter how old a heartbeat makes a replica dead (default 5 s); SweepEvery how often
	// the replica looks for dead replicas' work (default: Heartbeat).
	Heartbeat, DeadAfter, SweepEvery time.Duration
}

// Engine drives runs.
type Engine struct {
	pool       *pgxpool.Pool
	river      *river.Client[pgx.Tx]
	log        *slog.Logger
	cfg        Config
	executors  map[string]Executor
	catalog    map[string]connectors.Entry
	hidden     map[string]map[string]bool // x-expression params, kept raw
	progs      *programs
	timers     *timers
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator

	mu sync.Mutex
	// running holds, per run, the cancel of each job driving it here (by job id: parallel
	// blocks of one run may run in several jobs).
	running map[string]map[int64]context.CancelCauseFunc

	stopping chan struct{} // closed when Stop begins: workers hand runs back between steps
	stopOnce sync.Once
	bgCancel context.CancelFunc
	bgDone   chan struct{}
}

// runArgs is the one job kind: drive run RunID as far as it goes. Trace carries the W3C trace
// context of what inserted the job (the dispatching request, a signal, the step before), so
// the run's steps join that trace.
type runArgs struct {
	RunID string            `json:"run_id"`
	Trace map[string]string `json:"trace,omitempty"`
}

// args is the job that continues runID, in ctx's trace.
func (e *Engine) args(ctx context.Context, runID string) runArgs {
	a := runArgs{RunID: runID}
	if e.propagator != nil && trace.SpanContextFromContext(ctx).IsValid() {
		a.Trace = map[string]string{}
		e.propagator.Inject(ctx, propagation.MapCarrier(a.Trace))
	}
	return a
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

// Work drives the run. No run is left behind by a job that keeps failing: a panic is an
// error like any other, and when the last of the job's tries fails too, the run is failed
// with the error recorded (failJob) rather than left waiting for a job River has discarded.
func (w *worker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	err := w.e.driveSafely(ctx, job)
	if err == nil || job.Attempt < job.MaxAttempts || ctx.Err() != nil {
		return err
	}
	w.e.log.Error("run job failed its last try; failing the run", "run_id", job.Args.RunID, "job_id", job.ID, "attempt", job.Attempt, "err", err)
	if ferr := w.e.failJob(context.WithoutCancel(ctx), job, fmt.Errorf("the engine could not go on with this run after %d tries: %w", job.Attempt, err)); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

// NextRetry spaces a failing job's tries 1 s, 2 s, 4 s ... up to a minute apart (River's
// default grows as attempt⁴ seconds, days apart by the last tries): a run whose job fails
// for a passing reason (its database restarting) goes on soon after, and one that keeps
// failing is failed within about 20 minutes.
func (w *worker) NextRetry(job *river.Job[runArgs]) time.Time {
	return time.Now().Add(jobRetryDelay(job.Attempt))
}

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
		progs: newPrograms(), running: map[string]map[int64]context.CancelCauseFunc{},
		stopping: make(chan struct{}), bgDone: make(chan struct{}),
	}
	tp := cfg.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	e.tracer, e.propagator = tp.Tracer("svc.dev/services/run-orchestrator/engine"), cfg.Propagator
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
		// Runs, attempts and their history are our own tables; a finished job row is only a
		// spent queue entry. Kept long, they bloat the table every fetch and sweep reads.
		CompletedJobRetentionPeriod: 5 * time.Minute,
		Logger:                      log.With("component", "river"),
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

// Stopping is closed when Stop begins: from then on runs are handed back between steps.
func (e *Engine) Stopping() <-chan struct{} { return e.stopping }

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

// Dispatch stores the run, its idempotency record and its first job in one transaction: the
// batch of one of DispatchMany. When a start under 24 h old already holds the key, nothing is
// stored and that run's id comes back with deduplicated set.
func (e *Engine) Dispatch(ctx context.Context, r run.NewRun, key string) (string, bool, error) {
	ids, err := e.DispatchMany(ctx, []run.NewRun{r}, []string{key})
	if err != nil {
		return "", false, err
	}
	return ids[0], ids[0] != r.ID, nil
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

// DispatchMany stores runs, their idempotency records (keys[i] is runs[i]'s key; "" for none)
// and their first jobs in one transaction. The (organization, key) pairs that are set must be
// distinct. It returns, per run, the run that holds its key: runs[i].ID when it was stored, or
// the run of a concurrent start that took the key first (that run is then not stored). Either
// everything is stored or, on error, nothing.
func (e *Engine) DispatchMany(ctx context.Context, runs []run.NewRun, keys []string) ([]string, error) {
	if len(keys) != len(runs) {
		return nil, fmt.Errorf("dispatch many: %d runs, %d keys", len(runs), len(keys))
	}
	ids := make([]string, len(runs))
	if len(runs) == 0 {
		return ids, nil
	}
	// Keys are inserted in (organization, key) order, so two batches that share keys lock
	// them in the same order and never deadlock.
	keyed := make([]int, 0, len(runs))
	seen := make(map[[2]string]bool, len(runs))
	for i, k := range keys {
		if k == "" {
			continue
		}
		ok := [2]string{runs[i].OrganizationID, k}
		if seen[ok] {
			return nil, fmt.Errorf("dispatch many: key %q of %s twice", k, runs[i].OrganizationID)
		}
		seen[ok] = true
		keyed = append(keyed, i)
	}
	slices.SortFunc(keyed, func(a, b int) int {
		return cmp.Or(cmp.Compare(runs[a].OrganizationID, runs[b].OrganizationID), cmp.Compare(keys[a], keys[b]))
	})
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		n := len(runs)
		rid, org, wf, def, in, trig := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ver := make([]int64, n)
		for i, r := range runs {
			rid[i], org[i], wf[i], ver[i] = r.ID, r.OrganizationID, r.WorkflowID, r.WorkflowVersion
			def[i], in[i], trig[i] = string(r.Definition), string(r.Input), string(r.Trigger)
			ids[i] = r.ID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO runs (id, organization_id, workflow_id, workflow_version, definition, input, status, trigger)
			SELECT id, org, wf, ver, def::jsonb, input::jsonb, 'queued', trig::jsonb
			FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[]) AS r(id, org, wf, ver, def, input, trig)`,
			rid, org, wf, ver, def, in, trig); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		if len(keyed) > 0 {
			lost, err := e.insertKeys(ctx, tx, runs, keys, keyed)
			if err != nil {
				return err
			}
			var drop []string
			for i, winner := range lost {
				ids[i] = winner
				drop = append(drop, runs[i].ID)
			}
			if len(drop) > 0 {
				if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE id = ANY($1)`, drop); err != nil {
					return fmt.Errorf("drop runs whose key was taken: %w", err)
				}
			}
		}
		jobs := make([]river.InsertManyParams, 0, n)
		for i, r := range runs {
			if ids[i] == r.ID {
				jobs = append(jobs, river.InsertManyParams{Args: e.args(ctx, r.ID)})
			}
		}
		if len(jobs) > 0 {
			if _, err := e.river.InsertManyTx(ctx, tx, jobs); err != nil {
				return fmt.Errorf("insert jobs: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch many: %w", err)
	}
	return ids, nil
}

// insertKeys inserts the idempotency records of runs[keyed...]; a key older than 24 h is
// taken over, a fresh one is the earlier start's. A key a concurrent start holds (committed before this statement got
// its row lock) is lost: the result maps each such run's index to the winner's run id.
func (e *Engine) insertKeys(ctx context.Context, tx pgx.Tx, runs []run.NewRun, keys []string, keyed []int) (map[int]string, error) {
	org, key, rid := make([]string, len(keyed)), make([]string, len(keyed)), make([]string, len(keyed))
	for j, i := range keyed {
		org[j], key[j], rid[j] = runs[i].OrganizationID, keys[i], runs[i].ID
	}
	rows, err := tx.Query(ctx, `INSERT INTO idempotency_keys (organization_id, key, run_id)
		SELECT org, key, rid FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(org, key, rid, n) ORDER BY n
		ON CONFLICT (organization_id, key) DO UPDATE SET run_id = excluded.run_id, created_at = now()
		WHERE idempotency_keys.created_at < now() - interval '24 hours'
		RETURNING run_id`, org, key, rid)
	if err != nil {
		return nil, fmt.Errorf("insert idempotency keys: %w", err)
	}
	won, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert idempotency keys: %w", err)
	}
	if len(won) == len(keyed) {
		return nil, nil
	}
	stored := make(map[string]bool, len(won))
	for _, id := range won {
		stored[id] = true
	}
	var lostOrg, lostKey []string
	lostIdx := map[[2]string]int{}
	for _, i := range keyed {
		if !stored[runs[i].ID] {
			lostOrg, lostKey = append(lostOrg, runs[i].OrganizationID), append(lostKey, keys[i])
			lostIdx[[2]string{runs[i].OrganizationID, keys[i]}] = i
		}
	}
	// A new statement sees the winners' commits (read committed).
	rows, err = tx.Query(ctx, `SELECT i.organization_id, i.key, i.run_id FROM idempotency_keys i
		JOIN unnest($1::text[], $2::text[]) AS k(org, key) ON i.organization_id = k.org AND i.key = k.key`, lostOrg, lostKey)
	if err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	lost := make(map[int]string, len(lostIdx))
	var o, k, id string
	if _, err := pgx.ForEachRow(rows, []any{&o, &k, &id}, func() error {
		if i, ok := lostIdx[[2]string{o, k}]; ok {
			lost[i] = id
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	if len(lost) != len(lostIdx) {
		return nil, fmt.Errorf("read idempotency keys: %w", errDuplicateKey)
	}
	return lost, nil
}

// RunsForKeys returns, per (orgs[i], keys[i]), the run the unexpired idempotency key names, or
// "", in one query.
func (e *Engine) RunsForKeys(ctx context.Context, orgs, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := e.pool.Query(ctx, `SELECT k.n, i.run_id FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(org, key, n)
		JOIN idempotency_keys i ON i.organization_id = k.org AND i.key = k.key
		AND i.created_at >= now() - interval '24 hours'`, orgs, keys)
	if err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	var (
		n  int64
		id string
	)
	if _, err := pgx.ForEachRow(rows, []any{&n, &id}, func() error {
		if n >= 1 && int(n) <= len(out) {
			out[n-1] = id
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	return out, nil
}

// signalOutput is a signal wait's output. The payload goes in as stored, never re-decoded: a
// value the decoder could not hold would otherwise become null without a word.
func signalOutput(name string, payload []byte) json.RawMessage {
	p := json.RawMessage("null")
	if len(payload) > 0 && json.Valid(payload) {
		p = payload
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
	if _, err := e.save(ctx, tx, l); err != nil {
		return false, err
	}
	if _, err := e.river.InsertTx(ctx, tx, e.args(ctx, l.id), nil); err != nil {
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
		if l.broken != nil {
			return e.failBroken(ctx, tx, l, l.broken)
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
		if l.broken != nil {
			// Stored, but a run that cannot be read never advances: it fails here (it may be
			// parked in a wait, with no worker that would find out).
			return e.failBroken(ctx, tx, l, l.broken)
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
		attempts, err := runningAttempts(ctx, tx, runID, "")
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
		// args @> uses River's GIN index on args (args->>'run_id' would read the whole table).
		rows, err := tx.Query(ctx, `SELECT id FROM river_job WHERE kind = $1 AND args @> jsonb_build_object('run_id', $2::text)
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
	for _, c := range e.running[runID] {
		c(errors.New("run cancelled"))
	}
	e.mu.Unlock()
	return status, nil
}
