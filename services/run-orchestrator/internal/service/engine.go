package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin"
	"svc.dev/services/run-orchestrator/internal/adapters/postgres"
	"svc.dev/services/run-orchestrator/internal/adapters/river"
	"svc.dev/services/run-orchestrator/internal/adapters/runevents"
	"svc.dev/services/run-orchestrator/internal/adapters/runnotify"
	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The durable runtime svc-runtime, composed: the engine (app/engine) drives runs with the
// domain's interpreter and the connectors' executors; around it, the run store (Postgres: one
// transaction per event on a run), the job queue (River, whose workers hand runs to the
// engine), timers (waits due soon), replicas (heartbeats and the sweep of dead replicas' runs)
// and the event feed (every committed change of a run).

// engineConfig is what the runtime needs from the service's settings.
type engineConfig struct {
	Replica                          string
	Workers                          int
	OrgCeiling                       int
	Connectors                       connectors.Config
	Limits                           run.Limits
	Heartbeat, DeadAfter, SweepEvery time.Duration
	Tracer                           trace.TracerProvider
	Propagator                       propagation.TextMapPropagator
	Expressions                      run.EvalLimits
	// Meter records the engine's, the queue's and the backlog's metrics (docs/METRICS.md).
	Meter metric.MeterProvider
}

// runtime is the engine and the adapters around it, and their life cycle.
type runtime struct {
	engine   *engine.Engine
	jobs     *river.Jobs
	queue    *river.Queue
	timers   *postgres.Timers
	replicas *postgres.Replicas
	feed     *runevents.Feed
	backlog  *postgres.Backlog
	// hub wakes this replica's event streams: from the listener (every replica's commits,
	// through NOTIFY) and directly from the notifier (this replica's).
	hub      *runnotify.Hub
	notifier *runnotify.Notifier
	listener *runnotify.Listener
	bgCancel context.CancelFunc
	bgDone   sync.WaitGroup
	replica  string
	stopOnce sync.Once
	stopErr  error
}

// newEngine builds the runtime; it migrates River's tables and starts nothing (start does).
func newEngine(ctx context.Context, pool *pgxpool.Pool, cfg engineConfig, log *slog.Logger) (*runtime, error) {
	if cfg.Replica == "" || len(cfg.Replica) > 100 {
		return nil, fmt.Errorf("engine: replica id must be 1 to 100 characters, got %q", cfg.Replica)
	}
	catalog, err := connectors.Load()
	if err != nil {
		return nil, err
	}
	runtimes := builtin.All()
	interp := run.NewInterpreter(run.Connectors(catalog, runtimes, cfg.Connectors), run.NewTemplates(cfg.Expressions), func() string { return wire.NewID(wire.Attempt) }, run.WithLimits(cfg.Limits))
	jobs, err := river.NewJobs(ctx, pool, river.Config{Schema: postgres.Schema, Replica: cfg.Replica, Workers: cfg.Workers,
		OrgCeiling: cfg.OrgCeiling, Propagator: cfg.Propagator, Meter: cfg.Meter}, log)
	if err != nil {
		return nil, err
	}
	tm := postgres.NewTimers(pool, log)
	feed := runevents.New()
	hub := runnotify.NewHub()
	notifier := runnotify.NewNotifier(pool, hub, runnotify.DefaultBatch, log)
	store := postgres.NewRunStore(pool, jobs, publishers{feed, notifier}, tm, cfg.Replica, log)
	runs, err := engine.New(engine.Config{Runs: store, Turns: jobs, Interpreter: interp, Catalog: catalog,
		Connectors: runtimes, ConnectorConfig: cfg.Connectors, Tracer: cfg.Tracer, Meter: cfg.Meter, Log: log})
	if err != nil {
		return nil, err
	}
	var backlog *postgres.Backlog
	if cfg.Meter != nil {
		if backlog, err = postgres.NewBacklog(pool, cfg.Meter, log); err != nil {
			return nil, err
		}
	}
	queue := river.New(jobs, runs)
	reps := postgres.NewReplicas(pool, postgres.ReplicasConfig{Replica: cfg.Replica, Heartbeat: cfg.Heartbeat, DeadAfter: cfg.DeadAfter, SweepEvery: cfg.SweepEvery},
		runs.Sweep, notifier, log)
	// A first stream here: the heartbeat tells the others at once, and the streams read again
	// once the others have surely heard (their next heartbeat, with room for a slow one).
	hub.OnFirst(2*reps.Heartbeat()+500*time.Millisecond, reps.BeatNow)
	return &runtime{engine: runs, jobs: jobs, queue: queue, timers: tm, replicas: reps, feed: feed, backlog: backlog, hub: hub, notifier: notifier,
		listener: runnotify.NewListener(pool, hub, log), replica: cfg.Replica}, nil
}

// publishers hands each commit's changes to every publisher, in order.
type publishers []engine.Publisher

func (ps publishers) Publish(changes []run.Change) {
	for _, p := range ps {
		p.Publish(changes)
	}
}

// start registers the replica (before it fetches any job, so its jobs are never taken for a
// dead replica's), starts the heartbeat and the sweep, begins working jobs and arms the wait
// timers.
func (e *runtime) start(ctx context.Context) error {
	if err := e.replicas.Register(ctx); err != nil {
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.bgCancel = cancel
	e.bgDone.Add(2)
	go func() { defer e.bgDone.Done(); e.notifier.Run(bg) }()
	go func() { defer e.bgDone.Done(); e.listener.Run(bg) }()
	e.replicas.Start(ctx)
	if err := e.queue.Start(ctx); err != nil {
		return err
	}
	e.timers.Start(ctx, e.engine.Wake)
	return nil
}

// stop stops fetching jobs; steps in flight finish and commit and their runs are handed back
// between steps (a retry backoff at once, due at its end). Then the replica deregisters:
// should a step outlast ctx, another replica's sweep records its attempt lost and the run
// continues there. stop may be called more than once.
func (e *runtime) stop(ctx context.Context) error {
	e.stopOnce.Do(func() {
		if e.backlog != nil {
			e.backlog.Close()
		}
		e.timers.Stop()
		err := e.queue.Stop(ctx)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		e.jobs.Close()
		e.stopErr = errors.Join(err, e.replicas.Stop(dctx))
		if e.bgCancel != nil {
			e.bgCancel() // the notifier sends what the last steps committed, then ends
			e.bgDone.Wait()
		}
	})
	return e.stopErr
}
