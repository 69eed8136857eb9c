package engine

import (
	"context"
	"sync"
	"time"
)

// horizon is how far ahead the poller arms in-process timers; pollEvery how often it looks.
// River's scheduler checks only every few seconds, so waits due soon need timers of their own
// (ARCHITECTURE §4). Every replica arms every due wait; the waits row decides who wins.
const (
	horizon   = 3 * time.Second
	pollEvery = time.Second
)

type timers struct {
	e      *Engine
	mu     sync.Mutex
	armed  map[[2]string]*time.Timer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newTimers(e *Engine) *timers {
	return &timers{e: e, armed: map[[2]string]*time.Timer{}, done: make(chan struct{})}
}

func (t *timers) start(ctx context.Context) {
	t.mu.Lock()
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

func (t *timers) stop() {
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

// poll arms a timer for every wait due within the horizon (and every overdue one, after a
// restart).
func (t *timers) poll() {
	rows, err := t.e.pool.Query(t.ctx, `SELECT run_id, block_id, wake_at FROM waits WHERE wake_at IS NOT NULL AND wake_at < now() + $1::interval`,
		horizon.String())
	if err != nil {
		if t.ctx.Err() == nil {
			t.e.log.Warn("poll waits", "err", err)
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var runID, blockID string
		var at time.Time
		if err := rows.Scan(&runID, &blockID, &at); err != nil {
			t.e.log.Warn("poll waits", "err", err)
			return
		}
		t.arm(runID, blockID, at)
	}
}

// arm sets the timer of one wait unless it is already set or beyond the horizon.
func (t *timers) arm(runID, blockID string, at time.Time) {
	d := time.Until(at)
	if d > horizon {
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
		if err := t.e.wake(ctx, runID, blockID); err != nil && ctx.Err() == nil {
			t.e.log.Warn("wake", "run_id", runID, "block_id", blockID, "err", err)
		}
		t.mu.Lock()
		delete(t.armed, key)
		t.mu.Unlock()
	})
}
