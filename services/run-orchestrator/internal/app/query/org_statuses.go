package query

// The organization's stream (GET /api/runs/events) is woken by notifications, which can be lost
// (the listener reconnecting, a notification of another replica's commit that never comes).
// It also reads, every Recheck, the organization's runs whose status changed since it last read,
// so a lost notification delays a list's update by at most that. This file is the read's port
// and where the reading stands (CatchUp, pure).

import (
	"context"
	"sync"
	"time"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// OrgStatuses are the organization stream's catch-up reads (a store that cannot be reached is
// an *port.UnavailableError).
type OrgStatuses struct {
	reader port.OrgStatusReader
	shared *sharedReads
}

// NewOrgStatuses returns the catch-up reads over reader.
func NewOrgStatuses(reader port.OrgStatusReader) OrgStatuses {
	if reader == nil {
		panic("nil reader")
	}
	return OrgStatuses{reader: reader, shared: &sharedReads{m: map[string]*sharedRead{}}}
}

// Horizon is where a stream opened now starts catching up.
func (o OrgStatuses) Horizon(ctx context.Context) (time.Time, error) {
	t, err := o.reader.Horizon(ctx)
	return t, port.StoreError(err)
}

// After reads one page of org's status changes after the key after, and the horizon before it.
func (o OrgStatuses) After(ctx context.Context, org, workflowID string, after port.StatusKey, limit int) ([]port.RunStatus, time.Time, error) {
	page, h, err := o.reader.StatusesAfter(ctx, org, workflowID, after, limit)
	return page, h, port.StoreError(err)
}

// Run reads the run id of org as StatusesAfter does, for a notification naming it that the
// caller received at notified. Every open stream of the organization on this replica is woken
// by the same notification: they share one read that began after it (sharedReads), so an
// organization's streams cost one read a change, not one each (twenty streams on a flood's
// runs made thousands of reads a second and held other organizations' work back).
func (o OrgStatuses) Run(ctx context.Context, org, id string, notified time.Time) (run.Record, error) {
	if o.shared == nil {
		r, err := o.reader.Status(ctx, org, id)
		return r, port.StoreError(err)
	}
	r, err := o.shared.read(ctx, org+"\x00"+id, notified, func(ctx context.Context) (run.Record, error) {
		return o.reader.Status(ctx, org, id)
	})
	return r, port.StoreError(err)
}

// sharedReads runs one read of a run's status for every caller notified before it began:
// a read begun before a caller's notification may predate the change it was told of, so that
// caller starts a read of its own (which later callers then share).
type sharedReads struct {
	mu sync.Mutex
	m  map[string]*sharedRead
}

type sharedRead struct {
	began time.Time
	done  chan struct{}
	rec   run.Record
	err   error
}

// sharedReadTimeout bounds a shared read, which no single caller's context may cut short.
const sharedReadTimeout = 5 * time.Second

func (s *sharedReads) read(ctx context.Context, key string, notified time.Time, readFunc func(context.Context) (run.Record, error)) (run.Record, error) {
	s.mu.Lock()
	if f, ok := s.m[key]; ok && !f.began.Before(notified) {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.rec, f.err
		case <-ctx.Done():
			return run.Record{}, ctx.Err()
		}
	}
	f := &sharedRead{began: time.Now(), done: make(chan struct{})}
	s.m[key] = f
	s.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedReadTimeout)
	f.rec, f.err = readFunc(rctx)
	cancel()
	close(f.done)
	s.mu.Lock()
	if s.m[key] == f {
		delete(s.m, key)
	}
	s.mu.Unlock()
	return f.rec, f.err
}

// CatchUp is where the organization stream's reading stands. A pass reads every status change
// at or after its floor, a page at a time in key order. Its next floor is not the last change
// it read but the horizon of its first page: a transaction that began earlier may commit
// after the read with an older time (status_at is the transaction's start, not its commit),
// and the horizon is a time before every such transaction's start (the oldest one open, less a
// margin). So consecutive passes overlap by the changes between the horizon and the read, which
// they read twice: the stream sends a status only when it differs from the one it last saw for
// the run, so the overlap costs a read, never a duplicate event. A pass longer than a page
// continues from its last key (pages after the first may miss a change that commits between
// them with a time before that key; its time is after the first page's horizon, so the next
// pass reads it).
type CatchUp struct {
	floor   time.Time
	pos     port.StatusKey // the last key the pass read so far
	horizon time.Time      // the horizon of the pass's first page
	inPass  bool
}

// NewCatchUp starts reading at horizon (a Horizon read when the stream opened).
func NewCatchUp(horizon time.Time) CatchUp { return CatchUp{floor: horizon} }

// Floor is where the next pass starts: every change before it has been read.
func (c CatchUp) Floor() time.Time { return c.floor }

// After is the key the next page is read after.
func (c CatchUp) After() port.StatusKey {
	if c.inPass {
		return c.pos
	}
	return port.StatusKey{At: c.floor} // every run id sorts after ""
}

// Next is where the reading stands after a page read from After(): page in key order, read
// with at most limit rows, and the horizon the read returned. done reports that the pass is
// over (the page was not full); the next pass starts at the new Floor.
func (c CatchUp) Next(page []port.RunStatus, limit int, horizon time.Time) (next CatchUp, done bool) {
	if !c.inPass {
		c.inPass, c.horizon = true, horizon
	}
	if len(page) < limit || len(page) == 0 {
		// The floor never goes back (a horizon before it would mean a transaction older than
		// the last pass's horizon, which that horizon accounted for).
		floor := c.floor
		if c.horizon.After(floor) {
			floor = c.horizon
		}
		return CatchUp{floor: floor}, true
	}
	c.pos = page[len(page)-1].Key()
	return c, false
}
