package runnotify

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// DefaultBatch is how long the notifier gathers changed runs before one NOTIFY.
const DefaultBatch = 2 * time.Millisecond

// maxPayload keeps a NOTIFY under Postgres's 8000-byte payload limit.
const maxPayload = 7000

// Notifier sends a NOTIFY on Channel for the runs that changed, batched, after their commits,
// while another replica has streams open (Remote). It is the replicas package's Streams: the
// heartbeat reads Open and tells Remote.
type Notifier struct {
	pool   *pgxpool.Pool
	local  *Hub
	every  time.Duration
	log    *slog.Logger
	remote atomic.Bool // another replica has streams open, or that is not known

	mu      sync.Mutex
	pending map[string]struct{} // "org/run"
	kick    chan struct{}
}

// NewNotifier returns a notifier over pool; local (may be nil) is woken at once, before the
// NOTIFY comes back through the listener.
func NewNotifier(pool *pgxpool.Pool, local *Hub, every time.Duration, log *slog.Logger) *Notifier {
	if pool == nil || log == nil {
		panic("nil pool or log")
	}
	if every <= 0 {
		every = DefaultBatch
	}
	n := &Notifier{pool: pool, local: local, every: every, log: log, pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
	n.remote.Store(true) // until a heartbeat says otherwise
	return n
}

// Open says whether this replica has streams open.
func (n *Notifier) Open() bool { return n.local != nil && n.local.Open() }

// Notifying says whether commits are being notified to the other replicas.
func (n *Notifier) Notifying() bool { return n.remote.Load() }

// Remote records whether another live replica has streams open; while none has, commits are
// not notified.
func (n *Notifier) Remote(watched bool) { n.remote.Store(watched) }

// Publish records the runs of one commit's changes (engine.Publisher); it never blocks.
func (n *Notifier) Publish(changes []run.Change) {
	if len(changes) == 0 {
		return
	}
	remote := n.remote.Load()
	if remote {
		n.mu.Lock()
		for _, c := range changes {
			n.pending[c.OrganizationID+"/"+c.RunID] = struct{}{}
		}
		n.mu.Unlock()
	}
	if n.local != nil {
		// Once per run of the commit (its changes are mostly of one run), not once per change.
		for i, c := range changes {
			if i == 0 || c.RunID != changes[i-1].RunID {
				n.local.Wake(c.OrganizationID, c.RunID)
			}
		}
	}
	if !remote {
		return
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Run sends the pending notifications until ctx is done, then once more.
func (n *Notifier) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			n.flush(fctx)
			cancel()
			return
		case <-n.kick:
		}
		// Gather the commits of the next few milliseconds into the same NOTIFY.
		t := time.NewTimer(n.every)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		n.flush(ctx)
	}
}

func (n *Notifier) flush(ctx context.Context) {
	n.mu.Lock()
	keys := make([]string, 0, len(n.pending))
	for k := range n.pending {
		keys = append(keys, k)
	}
	clear(n.pending)
	n.mu.Unlock()
	for len(keys) > 0 {
		var b strings.Builder
		for len(keys) > 0 && b.Len()+len(keys[0])+1 <= maxPayload {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(keys[0])
			keys = keys[1:]
		}
		if b.Len() == 0 { // one key over the limit: ids are short, never here
			keys = keys[1:]
			continue
		}
		if _, err := n.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, b.String()); err != nil {
			// Streams re-check periodically: a lost notification delays, never loses, events.
			n.log.WarnContext(ctx, "run change notification failed", "err", err)
		}
	}
}
