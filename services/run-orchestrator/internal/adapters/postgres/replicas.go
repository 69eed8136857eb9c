// Replicas are crash safety's liveness side: each orchestrator
// process registers in the replicas table, refreshes its heartbeat and, on a timer, sweeps
// the runs of replicas that stopped heartbeating.
//
// Every replica registers before River starts fetching and refreshes its heartbeat every
// ReplicasConfig.Heartbeat; one whose heartbeat (database clock) is older than ReplicasConfig.DeadAfter, or
// that has no row at all, is dead. Every replica runs the sweep every ReplicasConfig.SweepEvery (the
// run store serializes sweeps with an advisory lock): it finds runs a dead replica holds (a
// running attempt not parked in a wait, or a running job it fetched last) and, under the
// run's row lock, records those attempts lost, finalizes the dead replica's job and queues a
// fresh one in the same commit, so the run continues on a live replica at once.
//
// River's own rescuer never touches these jobs: the worker's Timeout is -1 (no job timeout),
// and River's rescuer ignores running jobs without a timeout whatever RescueStuckJobsAfter
// says (maintenance/job_rescuer.go, makeRetryDecision). So there is one recovery path, ours.
//
// Fencing: a replica declared dead that still runs (a long pause, a partition) must not apply
// anything. Every transaction a worker makes checks, under the run's row lock, that its job
// is still running; the sweep finalizes that job under the same lock, so a zombie's result is
// dropped and a live replica never runs the same attempt twice.

package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of the crash-safety settings.
const (
	DefaultHeartbeat = time.Second
	DefaultDeadAfter = 5 * time.Second
)

// ReplicasConfig tunes liveness: Heartbeat is how often the replica refreshes its row (default 1 s),
// DeadAfter how old a heartbeat makes a replica dead (default 5 s), SweepEvery how often the
// replica sweeps (default: Heartbeat).
type ReplicasConfig struct {
	Replica                          string
	Heartbeat, DeadAfter, SweepEvery time.Duration
}

// Streams is what the heartbeat reports of the event streams: whether this replica has any
// open (Open), and whether another live replica has (Remote, told after every heartbeat;
// true when the heartbeat failed, so a replica that cannot tell keeps notifying).
type Streams interface {
	Open() bool
	Remote(watched bool)
}

// SweepFunc recovers the runs of replicas dead for deadAfter; it returns how many attempts
// it recorded lost.
type SweepFunc func(ctx context.Context, deadAfter time.Duration) (int, error)

// Replicas keeps one replica's row alive and sweeps.
type Replicas struct {
	pool    *pgxpool.Pool
	cfg     ReplicasConfig
	sweep   SweepFunc
	streams Streams
	log     *slog.Logger
	beat    chan struct{} // BeatNow's request

	cancel context.CancelFunc
	done   chan struct{}
}

// NewReplicas fills cfg's defaults; sweep is the engine's, streams (nil: none are ever open here,
// and the others are told to nothing) what the heartbeat reports.
func NewReplicas(pool *pgxpool.Pool, cfg ReplicasConfig, sweep SweepFunc, streams Streams, log *slog.Logger) *Replicas {
	if pool == nil || sweep == nil || log == nil {
		panic("replicas: New needs a pool, a sweep and a logger")
	}
	if streams == nil {
		streams = noStreams{}
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
	return &Replicas{pool: pool, cfg: cfg, sweep: sweep, streams: streams, log: log, beat: make(chan struct{}, 1)}
}

type noStreams struct{}

func (noStreams) Open() bool  { return false }
func (noStreams) Remote(bool) {}

// Register writes (or refreshes) the replica's row: call it before fetching any job, so the
// replica's jobs are never taken for a dead replica's. The same statement records whether
// this replica has event streams open and reads whether another live one has.
func (r *Replicas) Register(ctx context.Context) error {
	host, _ := os.Hostname()
	var remote bool
	err := r.pool.QueryRow(ctx, `WITH me AS (
			INSERT INTO replicas (id, host, pid, watched) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), watched = $4)
		SELECT EXISTS (SELECT 1 FROM replicas
			WHERE id <> $1 AND watched AND heartbeat_at > now() - make_interval(secs => $5))`,
		r.cfg.Replica, host, os.Getpid(), r.streams.Open(), r.cfg.DeadAfter.Seconds()).Scan(&remote)
	if err != nil {
		r.streams.Remote(true)
		return fmt.Errorf("heartbeat: %w", err)
	}
	r.streams.Remote(remote)
	return nil
}

// Heartbeat is how often the replica refreshes its row.
func (r *Replicas) Heartbeat() time.Duration { return r.cfg.Heartbeat }

// BeatNow asks the heartbeat loop for a heartbeat at once (the first stream of this replica
// opened: the others should start notifying it); it never blocks.
func (r *Replicas) BeatNow() {
	select {
	case r.beat <- struct{}{}:
	default:
	}
}

// Start runs the heartbeat and the sweep in the background until Stop.
func (r *Replicas) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.loop(ctx)
	}()
}

// Stop ends the background work and removes the replica's row, so whatever it still holds is
// swept at once.
func (r *Replicas) Stop(ctx context.Context) error {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	_, err := r.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, r.cfg.Replica)
	return err
}

func (r *Replicas) loop(ctx context.Context) {
	beat := time.NewTicker(r.cfg.Heartbeat)
	defer beat.Stop()
	sweep := time.NewTicker(r.cfg.SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
		case <-r.beat:
		case <-sweep.C:
			if _, err := r.sweep(ctx, r.cfg.DeadAfter); err != nil && ctx.Err() == nil {
				r.log.Warn("sweep of dead replicas failed", "err", err)
			}
			continue
		}
		if err := r.Register(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("replica heartbeat failed", "replica", r.cfg.Replica, "err", err)
		}
	}
}
