package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverChain40 is the peer of chain-40-http done with River alone: the chain of 40 durable
// steps a River user would write, to set the engine's figure beside. A River client of bench's
// own, on a schema of its own (riverChainSchema) in the system's database, works one job kind:
// a link of a chain. Each link's Work, in one transaction, inserts the next link (InsertTx)
// and completes itself (JobCompleteTx), so a crash loses or doubles no link, as the engine's
// steps; the 40th completes alone and the chain is done. One chain at a time, chainWarmup
// chains not recorded and then chainRuns recorded, from just before the first link's insert to
// the 40th link's commit. The client is tuned as the orchestrator's River client is
// (FetchCooldown 2 ms, FetchPollInterval 100 ms, 100 workers), so the figure is River's at the
// settings the engine runs it with. There is no HTTP call: the link's work is its commit alone.
type riverChain40 struct{}

func (riverChain40) Name() string { return "river-chain-40" }

const (
	riverChainSchema = "bench_river_chain"
	riverChainLinks  = 40
)

// riverLink is one link of a chain: the Step-th of riverChainLinks.
type riverLink struct {
	Chain int `json:"chain"`
	Step  int `json:"step"`
}

func (riverLink) Kind() string { return "bench_chain_link" }

// linkWorker works the links: it inserts the next and completes its own in one transaction,
// then says when the last one has committed.
type linkWorker struct {
	river.WorkerDefaults[riverLink]
	pool *pgxpool.Pool
	done func(chain int, err error)
}

func (w *linkWorker) Work(ctx context.Context, job *river.Job[riverLink]) error {
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if job.Args.Step < riverChainLinks {
			client := river.ClientFromContext[pgx.Tx](ctx)
			if _, err := client.InsertTx(ctx, tx, riverLink{Chain: job.Args.Chain, Step: job.Args.Step + 1}, nil); err != nil {
				return fmt.Errorf("insert link %d: %w", job.Args.Step+1, err)
			}
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil || job.Args.Step == riverChainLinks {
		w.done(job.Args.Chain, err)
	}
	return err
}

// riverVersion is the version of River bench was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return "(version unknown)"
}

// databaseURL is the system's database as devstack finds it: SVC_DATABASE_URL, else the local
// server's database svc.
func databaseURL() string {
	if u := os.Getenv("SVC_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/svc?sslmode=disable"
}

func (s riverChain40) Run(ctx context.Context, env Env) ([]Result, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		return nil, fmt.Errorf("setup: database URL: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("setup: connect: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+riverChainSchema); err != nil {
		return nil, fmt.Errorf("setup: schema: %w", err)
	}
	defer func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+riverChainSchema+" CASCADE")
	}()
	quiet := slog.New(slog.DiscardHandler)
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: riverChainSchema, Logger: quiet})
	if err != nil {
		return nil, fmt.Errorf("setup: migrate: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("setup: migrate: %w", err)
	}

	var (
		mu      sync.Mutex
		waiters = map[int]chan error{}
	)
	w := &linkWorker{pool: pool, done: func(chain int, err error) {
		mu.Lock()
		ch := waiters[chain]
		delete(waiters, chain)
		mu.Unlock()
		if ch != nil {
			ch <- err
		}
	}}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            riverChainSchema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Workers:           workers,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		Logger:            quiet,
	})
	if err != nil {
		return nil, fmt.Errorf("setup: river client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("setup: river start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()

	env.Log("  %d chains of %d River jobs one at a time (+%d warm-up), schema %s", chainRuns, riverChainLinks, chainWarmup, riverChainSchema)
	var (
		lat      []time.Duration
		failures int
		firstErr string
		wall     time.Duration
		cpu      *cpuWindow
	)
	for i := range chainWarmup + chainRuns {
		if i == chainWarmup {
			cpu = env.CPU.from(time.Now(), "chain")
		}
		ch := make(chan error, 1)
		mu.Lock()
		waiters[i] = ch
		mu.Unlock()
		t0 := time.Now()
		_, err := client.Insert(ctx, riverLink{Chain: i, Step: 1}, nil)
		if err == nil {
			select {
			case err = <-ch:
			case <-time.After(chainRunLimit):
				err = fmt.Errorf("chain %d not done after %s", i, chainRunLimit)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		d := time.Since(t0)
		if i < chainWarmup {
			if err != nil {
				return nil, fmt.Errorf("warm-up chain: %w", err)
			}
			continue
		}
		wall += d
		if err != nil {
			failures++
			if firstErr == "" {
				firstErr = err.Error()
			}
			if errors.Is(err, context.Canceled) {
				return nil, err
			}
			continue
		}
		lat = append(lat, d)
	}
	st := sequentialStats(lat, failures, firstErr, wall)
	st.CPU = cpu.stop()
	note := fmt.Sprintf("River %s alone, %d chains one at a time: p50 %s / p99 %s / max %s ms.", riverVersion(), st.N, millis(st.P50), millis(st.P99), millis(st.Max))
	if st.N > failures {
		note += " " + perStepNote(st.P50, riverChainLinks, env.Baseline)
	}
	note += " Temporal's chain of 40 is not measured: it cannot run on this machine (no Docker, its server not installable)."
	return []Result{{Scenario: s.Name(), Phase: fmt.Sprintf("%d River jobs in a chain, each inserting the next and completing itself in one transaction, insert → last commit (sequential)", riverChainLinks), Stats: st, Note: note}}, nil
}
