package runnotify

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener holds one connection of the pool LISTENing on Channel and wakes the hub's watchers
// of every run notified.
type Listener struct {
	pool *pgxpool.Pool
	hub  *Hub
	log  *slog.Logger
	// ready is closed once the first LISTEN is in place (tests wait on it).
	ready chan struct{}
}

// NewListener returns a listener feeding hub.
func NewListener(pool *pgxpool.Pool, hub *Hub, log *slog.Logger) *Listener {
	if pool == nil || hub == nil || log == nil {
		panic("nil pool, hub or log")
	}
	return &Listener{pool: pool, hub: hub, log: log, ready: make(chan struct{})}
}

// Ready is closed once the listener listens.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// Run listens until ctx is done, reconnecting after a failure (a second later).
func (l *Listener) Run(ctx context.Context) {
	first := true
	for ctx.Err() == nil {
		err := l.listen(ctx, &first)
		if ctx.Err() != nil {
			return
		}
		l.log.WarnContext(ctx, "run change listener reconnects", "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

func (l *Listener) listen(ctx context.Context, first *bool) error {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is dropped rather than returned: it is in LISTEN state.
	defer func() { _ = conn.Hijack().Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return err
	}
	if *first {
		*first = false
		close(l.ready)
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.hub.wakePayload(n.Payload)
	}
}
