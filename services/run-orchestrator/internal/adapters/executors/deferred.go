package executors

import (
	"context"
	"sync"
)

// A block run before its transaction is known to commit (a run's blocks run at its dispatch,
// whose transaction may still fail or find the run's key taken) must leave no trace outside
// the run until then: its log lines wait in a DeferredLogs and are written once the
// transaction commits, or dropped.

// DeferredLogs holds the log lines of blocks run under a context from its Defer.
type DeferredLogs struct {
	mu    sync.Mutex
	lines []func()
}

type deferredKey struct{}

// Defer returns a context under which the log connector keeps its lines in d instead of
// writing them.
func (d *DeferredLogs) Defer(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferredKey{}, d)
}

// Write writes the lines kept so far, in order, and forgets them.
func (d *DeferredLogs) Write() {
	d.mu.Lock()
	lines := d.lines
	d.lines = nil
	d.mu.Unlock()
	for _, write := range lines {
		write()
	}
}

// Drop forgets the lines kept so far.
func (d *DeferredLogs) Drop() {
	d.mu.Lock()
	d.lines = nil
	d.mu.Unlock()
}

// logLine writes line at once, or keeps it when ctx defers logs.
func logLine(ctx context.Context, line func()) {
	d, _ := ctx.Value(deferredKey{}).(*DeferredLogs)
	if d == nil {
		line()
		return
	}
	d.mu.Lock()
	d.lines = append(d.lines, line)
	d.mu.Unlock()
}
