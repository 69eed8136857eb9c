package service

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"svc.dev/services/run-orchestrator/internal/app/command"
)

// sweeper runs the retention sweep every interval on this replica, the first one at a random
// point of the second half of the first interval so that replicas started together do not
// sweep in step. It logs one line per sweep.
type sweeper struct {
	sweep    command.SweepRetentionHandler
	interval time.Duration
	log      *slog.Logger
	cancel   context.CancelFunc
	done     sync.WaitGroup
	once     sync.Once
}

func newSweeper(sweep command.SweepRetentionHandler, interval time.Duration, log *slog.Logger) *sweeper {
	return &sweeper{sweep: sweep, interval: interval, log: log.With("component", "retention")}
}

func (s *sweeper) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		wait := s.interval/2 + rand.N(s.interval/2+1) //nolint:gosec // spreading replicas' sweeps needs no secure randomness
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			s.run(ctx)
			wait = s.interval
		}
	}()
}

func (s *sweeper) run(ctx context.Context) {
	res, err := s.sweep.Handle(ctx)
	attrs := []any{"deleted", res.Deleted, "definitions_deleted", res.Definitions, "batches", res.Batches, "caught_up", res.CaughtUp, "took_ms", res.Took.Milliseconds()}
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("retention sweep failed; the next one goes on", append(attrs, "err", err)...)
	case err == nil:
		s.log.Info("retention sweep", attrs...)
	}
}

// stop ends the loop after the sweep in progress, if any, stops at its next batch.
func (s *sweeper) stop() {
	s.once.Do(func() {
		if s.cancel != nil {
			s.cancel()
			s.done.Wait()
		}
	})
}
