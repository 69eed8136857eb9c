package http

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"svc.dev/libs/errs"
	"svc.dev/libs/web"
	"svc.dev/services/gateway/internal/app"
)

// DefaultMaxStreams is how many event streams one principal may hold open at once.
const DefaultMaxStreams = 20

// streams caps the event streams open per principal (rate-limit bucket). A stream took one
// token when it opened; it holds a slot while open. The slots are counted across gateway
// replicas by shared (Redis); while those cannot be counted, on this replica (open).
type streams struct {
	shared app.StreamSlots // nil: this replica alone
	mu     sync.Mutex
	max    int
	open   map[string]int
}

// isEventStream says whether r opens a run event stream (GET /api/runs/events,
// GET /api/runs/:id/events).
func isEventStream(r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/api/runs/") || !strings.HasSuffix(r.URL.Path, "/events") &&
		r.URL.Path != "/api/runs/events" {
		return false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/runs/"), "events")
	return rest == "" || (strings.Count(rest, "/") == 1 && strings.HasSuffix(rest, "/") && len(rest) > 1)
}

// acquire takes a slot of key; false when key holds max already.
func (s *streams) acquire(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] >= s.max {
		return false
	}
	s.open[key]++
	return true
}

func (s *streams) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key]--; s.open[key] <= 0 {
		delete(s.open, key)
	}
}

// WithMaxStreams sets how many event streams one principal may hold open (SVC_GATEWAY_MAX_STREAMS).
func (g *Gateway) WithMaxStreams(n int) *Gateway {
	if n < 1 {
		panic("max streams must be positive")
	}
	g.streams.max = n
	return g
}

// WithStreamSlots counts the streams' slots across gateway replicas in slots.
func (g *Gateway) WithStreamSlots(slots app.StreamSlots) *Gateway {
	g.streams.shared = slots
	return g
}

// take takes a slot of key for as long as ctx lives: shared across replicas when it can be
// counted there, else on this replica.
func (s *streams) take(ctx context.Context, log *slog.Logger, key string) bool {
	if s.shared != nil {
		ok, err := s.shared.Take(ctx, key, s.max)
		if err == nil {
			return ok
		}
		log.WarnContext(ctx, "stream slots: counted on this replica alone", "err", err)
	}
	if !s.acquire(key) {
		return false
	}
	context.AfterFunc(ctx, func() { s.release(key) })
	return true
}

// serveStream proxies an event stream: a slot of the principal's while it is open (429
// rate_limited past the cap), no write deadline (the server's WriteTimeout would cut it), and
// each event flushed as it comes (the proxy's FlushInterval -1; nothing buffers the answer).
func (g *Gateway) serveStream(w http.ResponseWriter, r *http.Request, key string, proxy http.Handler) {
	ctx, done := context.WithCancel(r.Context())
	defer done() // the slot is given back
	if !g.streams.take(ctx, g.log, key) {
		web.WriteJSON(w, http.StatusTooManyRequests,
			errs.Newf(errs.RateLimited, "at most %d event streams may be open at once for this principal; close one", g.streams.max).
				With("maxStreams", g.streams.max).Body())
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	proxy.ServeHTTP(w, r.WithContext(ctx))
}
