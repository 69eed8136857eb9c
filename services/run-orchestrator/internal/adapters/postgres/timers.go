// Timers end waits on time: it arms an in-process timer for every wait due within a
// few seconds (polling the waits table every second, and armed at once by the run store when
// it commits a wait), and wakes the run when it fires. River's scheduler checks only every few
// seconds, so waits due soon need timers of their own. Every replica arms
// every due wait; the first to lock the run releases the wait, the others find it released.

package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// timerHorizon is how far ahead the poller arms in-process timers; pollEvery how often it looks.
// River's scheduler checks only every few seconds, so waits due soon need timers of their own.
const (
	timerHorizon = 3 * time.Second
	pollEvery    = time.Second
)

// WakeFunc ends the wait of (runID, blockID) when its time has come.
type WakeFunc func(ctx context.Context, runID, blockID string) error

// Timers arms and fires the timers of one replica.
type Timers struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	wake   WakeFunc
	mu     sync.Mutex
	armed  map[[2]string]*time.Timer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewTimers builds the timers; nothing is armed before Start.
func NewTimers(pool *pgxpool.Pool, log *slog.Logger) *Timers {
	if pool == nil || log == nil {
		panic("timers: New needs a pool and a logger")
	}
	return &Timers{pool: pool, log: log, armed: map[[2]string]*time.Timer{}, done: make(chan struct{})}
}

// Start arms the waits due soon (every overdue one too, after a restart), polls for more every
// second, and calls wake when a timer fires.
func (t *Timers) Start(ctx context.Context, wake WakeFunc) {
	t.mu.Lock()
	t.wake = wake
	t.ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	t.mu.Unlock()
	go func() {
		defer close(t.done)
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			t.poll()
			select {
			case <-t.ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// Stop disarms every timer and ends the polling.
func (t *Timers) Stop() {
	t.mu.Lock()
	cancel := t.cancel
	for k, tm := range t.armed {
		tm.Stop()
		delete(t.armed, k)
	}
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-t.done
	}
}

// poll arms a timer for every wait due within the timerHorizon (and every overdue one, after a
// restart).
func (t *Timers) poll() {
	rows, err := t.pool.Query(t.ctx, `SELECT run_id, block_id, wake_at FROM waits WHERE wake_at IS NOT NULL AND wake_at < now() + $1::interval`,
		timerHorizon.String())
	if err != nil {
		if t.ctx.Err() == nil {
			t.log.Warn("poll waits", "err", err)
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var runID, blockID string
		var at time.Time
		if err := rows.Scan(&runID, &blockID, &at); err != nil {
			t.log.Warn("poll waits", "err", err)
			return
		}
		t.Arm(runID, blockID, at)
	}
}

// Arm sets the timer of one wait unless it is already set or beyond the timerHorizon.
func (t *Timers) Arm(runID, blockID string, at time.Time) {
	d := time.Until(at)
	if d > timerHorizon {
		return
	}
	key := [2]string{runID, blockID}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil || t.ctx.Err() != nil {
		return
	}
	if _, ok := t.armed[key]; ok {
		return
	}
	ctx := t.ctx
	t.armed[key] = time.AfterFunc(d, func() {
		if err := t.wake(ctx, runID, blockID); err != nil && ctx.Err() == nil {
			t.log.Warn("wake", "run_id", runID, "block_id", blockID, "err", err)
		}
		t.mu.Lock()
		delete(t.armed, key)
		t.mu.Unlock()
	})
}
