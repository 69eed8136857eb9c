package postgres

// The key-usage recorder keeps API keys' lastRequest fresh without a write on the request path:
// uses are collected in memory (the latest time per key) and written in one UPDATE every
// interval by a background goroutine, and once more on shutdown. lastRequest is therefore at
// most one interval (plus one write) late.

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Toucher writes a batch of uses (apikey.Repository.Touch).
type Toucher interface {
	Touch(ctx context.Context, uses map[string]time.Time) error
}

// Recorder implements port.KeyUsage.
type Recorder struct {
	store    Toucher
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[string]time.Time

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// maxPending bounds the batch held in memory; past it a use is dropped (lastRequest is a
// convenience, not an audit log) until the next flush empties the batch.
const maxPending = 100_000

// NewRecorder starts a recorder that flushes to store every interval until Close.
func NewRecorder(store Toucher, interval time.Duration, log *slog.Logger) *Recorder {
	if store == nil || log == nil || interval <= 0 {
		panic("keyusage: bad dependency")
	}
	r := &Recorder{store: store, log: log, interval: interval, pending: map[string]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// Record notes a use of keyID at at. It never blocks on I/O.
func (r *Recorder) Record(keyID string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.pending[keyID]; ok {
		if at.After(prev) {
			r.pending[keyID] = at
		}
		return
	}
	if len(r.pending) < maxPending {
		r.pending[keyID] = at
	}
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.interval+5*time.Second)
			_ = r.Flush(ctx)
			cancel()
		}
	}
}

// Flush writes what was recorded. On failure the uses go back into the batch for the next try.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = map[string]time.Time{}
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := r.store.Touch(ctx, batch)
	if err == nil {
		return nil
	}
	r.log.WarnContext(ctx, "api key usage not written; will retry", "keys", len(batch), "err", err)
	for id, at := range batch {
		r.Record(id, at)
	}
	return err
}

// Close stops the background flushes and writes what is left.
func (r *Recorder) Close(ctx context.Context) error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return r.Flush(ctx)
}
