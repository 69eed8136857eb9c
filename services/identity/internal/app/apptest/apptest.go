// Package apptest builds identity's application over the in-memory store with fakes that
// tests control: a clock, a fast password hasher, a mailer that keeps what it sends, an
// attempt limiter that counts, and a key-usage recorder that keeps what it is told.
package apptest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc.dev/services/identity/internal/adapters/memory"
	"svc.dev/services/identity/internal/app"
	"svc.dev/services/identity/internal/app/port"
)

// Clock is a settable clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Hasher is a fast, deterministic stand-in for argon2id: "h:" + hex(sha256(password)). It
// counts its calls, so that tests can tell which requests cost a (real) hash.
type Hasher struct {
	hashes, verifies atomic.Int64
	// Busy makes every call fail with port.ErrHasherBusy, as a full argon.Gate does.
	Busy atomic.Bool
}

func encode(p string) string {
	sum := sha256.Sum256([]byte(p))
	return "h:" + hex.EncodeToString(sum[:])
}

// Hash implements port.PasswordHasher.
func (h *Hasher) Hash(_ context.Context, p string) (string, error) {
	if h.Busy.Load() {
		return "", port.ErrHasherBusy
	}
	h.hashes.Add(1)
	return encode(p), nil
}

// Verify implements port.PasswordHasher.
func (h *Hasher) Verify(_ context.Context, p, encoded string) (bool, error) {
	if h.Busy.Load() {
		return false, port.ErrHasherBusy
	}
	h.verifies.Add(1)
	return encode(p) == encoded, nil
}

// Calls is how many hashes and verifications were asked for so far.
func (h *Hasher) Calls() (hashes, verifies int64) { return h.hashes.Load(), h.verifies.Load() }

// Mail is one mail sent.
type Mail struct{ Kind, To, Link string }

// Mailer keeps the mails.
type Mailer struct {
	mu    sync.Mutex
	Mails []Mail
}

// SendPasswordReset implements port.Mailer.
func (m *Mailer) SendPasswordReset(_ context.Context, email, link string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Mails = append(m.Mails, Mail{"reset", email, link})
	return nil
}

// SendInvitation implements port.Mailer.
func (m *Mailer) SendInvitation(_ context.Context, email, _, link string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Mails = append(m.Mails, Mail{"invitation", email, link})
	return nil
}

// Last returns the last mail of kind to email.
func (m *Mailer) Last(kind, email string) (Mail, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.Mails) - 1; i >= 0; i-- {
		if m.Mails[i].Kind == kind && m.Mails[i].To == email {
			return m.Mails[i], true
		}
	}
	return Mail{}, false
}

// Limiter allows Max attempts per key; the bundle uses it for every limit (the keys of each
// limit have their own prefix).
type Limiter struct {
	mu    sync.Mutex
	Max   int
	count map[string]int
}

// Allow implements port.AttemptLimiter.
func (l *Limiter) Allow(_ context.Context, key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count[key]++
	if l.count[key] > l.Max {
		return false, 6 * time.Second
	}
	return true, 0
}

// Usage keeps the recorded key uses.
type Usage struct {
	mu   sync.Mutex
	Uses map[string]time.Time
}

// Record implements port.KeyUsage.
func (u *Usage) Record(id string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.Uses[id] = at
}

// Used reports the recorded use of id.
func (u *Usage) Used(id string) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.Uses[id]
	return at, ok
}

// Bundle is an application with its fakes.
type Bundle struct {
	App     app.Application
	Store   *memory.Store
	Clock   *Clock
	Mailer  *Mailer
	Limiter *Limiter
	Usage   *Usage
	Hasher  *Hasher
}

// Options adjust New.
type Options struct{ Bootstrap bool }

// New builds the application over a fresh in-memory store.
func New(t testing.TB, opts Options) *Bundle {
	t.Helper()
	b := &Bundle{
		Store:   memory.NewStore(port.DefaultCeilings()),
		Clock:   &Clock{now: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)},
		Mailer:  &Mailer{},
		Limiter: &Limiter{Max: 10, count: map[string]int{}},
		Usage:   &Usage{Uses: map[string]time.Time{}},
		Hasher:  &Hasher{},
	}
	b.App = app.New(app.Dependencies{
		Repos: b.Store.Repositories(), Hasher: b.Hasher, Mailer: b.Mailer, KeyUsage: b.Usage,
		Limits: port.Limits{SignIn: b.Limiter, SignUp: b.Limiter, PasswordReset: b.Limiter, ChangePassword: b.Limiter,
			AcceptInvitation: b.Limiter},
		ResetLink:        func(token, _ string) string { return "http://test/reset-password?token=" + token },
		InvitationLink:   func(id string) string { return "http://test/accept-invitation/" + id },
		BootstrapEnabled: opts.Bootstrap,
		Now:              b.Clock.Now,
		Log:              slog.New(slog.DiscardHandler),
	})
	return b
}

// TokenOf returns the token in a mailed link.
func TokenOf(link string) string {
	_, tok, _ := strings.Cut(link, "token=")
	return tok
}
