package river

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/services/run-orchestrator/internal/domain/fairshare"
)

// Turns between steps. A worker that holds a run goes straight on to the run's next block
// without a queue hop (the orchestrator README, "How a run moves": per-step overhead is the
// product's speed), which would let one organization's runs keep every worker for as long as
// they have steps. So between
// two steps the worker looks at the head of the queue: when a job of another organization is
// queued ahead of the run's next turn, the run is handed to a fresh job, queued in its turn,
// and the worker takes the head of the queue. One organization alone never yields (nothing of
// anyone else is queued), so it keeps the no-hop speed.

// headEvery is how long a read of the queue's head serves the turns of every worker of this
// replica: one small indexed read every few milliseconds, not one per step.
const headEvery = 10 * time.Millisecond

// headSize is how many jobs from the head of the queue are read.
const headSize = 32

// queued is a job at the head of the queue: its organization and its tag; tagged says the tag
// is the fair share clock's (not the wall-clock time of a retry, a job due at a time of its
// own, or a job given back by the ceiling).
type queued struct {
	org    string
	tag    time.Time
	tagged bool
}

// turns decides whether a worker goes on with its run or yields.
type turns struct {
	pool  *pgxpool.Pool
	clock *fairshare.Clock

	mu      sync.Mutex
	readAt  time.Time
	head    []queued
	reading bool
	// conn is the read's own connection (only the reader touches it, one at a time, or close
	// when no read runs).
	conn   *pgxpool.Conn
	closed bool
}

// yield reports whether the worker driving a run of org should hand it back rather than go on:
// a job of another organization is queued at or before org's next turn. Going on counts as
// org's turn.
func (t *turns) yield(ctx context.Context, org string) bool {
	if org == "" {
		return false // a job queued before jobs carried their organization
	}
	now := time.Now()
	head := t.queueHead(ctx, now) // first: a fresh read moves the clock, and org's next turn with it
	next := t.clock.Next(org, now)
	for _, j := range head {
		if j.tag.After(next) {
			break
		}
		if j.org != org {
			return true
		}
	}
	t.clock.Charge(org, now)
	return false
}

// othersQueued reports whether a job of an organization other than org is at the head of the
// queue.
func (t *turns) othersQueued(ctx context.Context, org string) bool {
	h := t.queueHead(ctx, time.Now())
	for _, j := range h {
		if j.org != org {
			return true
		}
	}
	return false
}

// queueHead is the head of the queue, read at most every headEvery; while one worker reads it,
// the others use the last read. A failed read leaves the last one in place: turns are a
// matter of fairness, never of correctness.
func (t *turns) queueHead(ctx context.Context, now time.Time) []queued {
	t.mu.Lock()
	if now.Sub(t.readAt) < headEvery || t.reading || t.closed {
		head := t.head
		t.mu.Unlock()
		return head
	}
	t.reading = true
	t.mu.Unlock()

	head, err := t.read(ctx)
	if err == nil {
		// The clock's virtual time is the first tagged job's tag: where the queue stands.
		for _, j := range head {
			if j.tagged {
				t.clock.Head(j.tag)
				break
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reading = false
	t.readAt = now
	if t.closed && t.conn != nil {
		t.conn.Release() // closed while reading
		t.conn = nil
	}
	if err == nil {
		t.head = head
	}
	return t.head
}

// read reads the head of the queue on a connection of its own, held from the first read on:
// when the pool is busiest (a flood, streams reading on every change) is when the turns matter
// most, and a read waiting for a pooled connection would leave every worker with an old head
// for as long. Only one read runs at a time (queueHead), so one connection does. A failed read
// gives its connection up; the next read takes another.
func (t *turns) read(ctx context.Context) ([]queued, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if t.conn == nil {
		c, err := t.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		t.conn = c
	}
	// River's fetch order, on the index its fetch uses.
	rows, err := t.conn.Query(ctx, `SELECT coalesce(args->>'org', ''), scheduled_at,
			attempt = 0 AND NOT args ? 'due' AND NOT metadata ? 'snoozes' FROM river_job
		WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
		ORDER BY priority, scheduled_at, id LIMIT $1`, headSize)
	var head []queued
	if err == nil {
		head, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (queued, error) {
			var q queued
			err := row.Scan(&q.org, &q.tag, &q.tagged)
			return q, err
		})
	}
	if err != nil {
		// The connection may be broken: closed, the pool drops it when it comes back.
		_ = t.conn.Conn().Close(context.WithoutCancel(ctx))
		t.conn.Release()
		t.conn = nil
		return nil, err
	}
	return head, nil
}

// close gives the read's connection back, now or when a read in progress ends, and reads no
// more (the queue is stopping; the pool's Close waits for every connection).
func (t *turns) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.conn != nil && !t.reading {
		t.conn.Release()
		t.conn = nil
	}
}
