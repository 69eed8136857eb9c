package http

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"svc.dev/libs/errs"
	"svc.dev/libs/web"
)

// DefaultMaxStreams is how many event streams one principal may hold open on one gateway.
const DefaultMaxStreams = 20

// streams counts the event streams open per principal (rate-limit bucket) on this gateway.
// A stream took one token when it opened; it holds a slot while open.
type streams struct {
	mu   sync.Mutex
	max  int
	open map[string]int
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

// serveStream proxies an event stream: a slot of the principal's while it is open (429
// rate_limited past the cap), no write deadline (the server's WriteTimeout would cut it), and
// each event flushed as it comes (the proxy's FlushInterval -1; nothing buffers the answer).
func (g *Gateway) serveStream(w http.ResponseWriter, r *http.Request, key string, proxy http.Handler) {
	if !g.streams.acquire(key) {
		web.WriteJSON(w, http.StatusTooManyRequests,
			errs.Newf(errs.RateLimited, "at most %d event streams may be open at once for this principal; close one", g.streams.max).
				With("maxStreams", g.streams.max).Body())
		return
	}
	defer g.streams.release(key)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	proxy.ServeHTTP(w, r)
}
