package argon

import (
	"context"
	"time"

	"svc.dev/services/identity/internal/app/port"
)

// Gate is a PasswordHasher that lets at most a fixed number of hashes and verifications run
// at once, one process-wide semaphore in front of next. Every argon2id call holds its memory
// (19 MiB with DefaultParams) and one core for tens of milliseconds; without a bound, a burst
// of requests on the open auth routes allocates memory in proportion to the burst. With
// slots ≈ GOMAXPROCS the cores stay busy and memory stays at slots × the memory parameter.
//
// A call that finds every slot taken waits at most wait for one, then fails with
// port.ErrHasherBusy (the client is told to retry), or with ctx's error when ctx ends first.
type Gate struct {
	next  port.PasswordHasher
	slots chan struct{}
	wait  time.Duration
}

// NewGate returns a Gate of slots concurrent calls in front of next.
func NewGate(next port.PasswordHasher, slots int, wait time.Duration) *Gate {
	if next == nil {
		panic("nil hasher")
	}
	if slots < 1 {
		panic("slots must be positive")
	}
	return &Gate{next: next, slots: make(chan struct{}, slots), wait: wait}
}

// Hash implements port.PasswordHasher.
func (g *Gate) Hash(ctx context.Context, password string) (string, error) {
	if err := g.acquire(ctx); err != nil {
		return "", err
	}
	defer g.release()
	return g.next.Hash(ctx, password)
}

// Verify implements port.PasswordHasher.
func (g *Gate) Verify(ctx context.Context, password, encoded string) (bool, error) {
	if err := g.acquire(ctx); err != nil {
		return false, err
	}
	defer g.release()
	return g.next.Verify(ctx, password, encoded)
}

func (g *Gate) acquire(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-timer.C:
		return port.ErrHasherBusy
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Gate) release() { <-g.slots }
