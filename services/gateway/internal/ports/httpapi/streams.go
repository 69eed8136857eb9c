package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"svc.dev/libs/internalauth"
	"svc.dev/services/gateway/internal/app"
)

// DefaultMaxStreams is how many event streams one principal may hold open at once.
const DefaultMaxStreams = 20

// The ceilings of a user's and of an organization's open streams default to these multiples
// of a principal's (60 and 100 with the default 20): a user's sessions and keys together, and
// an organization's principals together, get a few principals' worth however many keys or
// organizations they create, and raising the principal's cap raises them along.
const (
	UserStreamsMultiple         = 3
	OrganizationStreamsMultiple = 5
)

// MaxStreamCeiling bounds every ceiling on open streams (and so their defaults).
const MaxStreamCeiling = 1_000_000

// StreamLimitsFor are the ceilings by default when one principal may hold perPrincipal
// streams open.
func StreamLimitsFor(perPrincipal int) app.StreamLimits {
	return app.StreamLimits{
		PerPrincipal:    perPrincipal,
		PerUser:         min(UserStreamsMultiple*perPrincipal, MaxStreamCeiling),
		PerOrganization: min(OrganizationStreamsMultiple*perPrincipal, MaxStreamCeiling),
	}
}

// streams caps the event streams open per principal (rate-limit bucket), per user (across
// the user's organizations and API keys) and per organization (app.StreamCeilings). A stream
// took one token when it opened; it holds a slot under each ceiling while open. The slots are
// counted across gateway replicas by shared (Redis); while those cannot be counted, on this
// replica (open), all or none alike.
type streams struct {
	shared app.StreamSlots // nil: this replica alone
	mu     sync.Mutex
	limits app.StreamLimits
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

// acquire takes a slot under every ceiling, or none; it answers the index of the first full
// ceiling, -1 when the slots were taken.
func (s *streams) acquire(ceilings []app.StreamCeiling) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range ceilings {
		if s.open[c.Key] >= c.Max {
			return i
		}
	}
	for _, c := range ceilings {
		s.open[c.Key]++
	}
	return -1
}

func (s *streams) release(ceilings []app.StreamCeiling) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range ceilings {
		if s.open[c.Key]--; s.open[c.Key] <= 0 {
			delete(s.open, c.Key)
		}
	}
}

// WithMaxStreams sets how many event streams one principal, one user and one organization
// may each hold open (SVC_GATEWAY_MAX_STREAMS, SVC_GATEWAY_MAX_STREAMS_PER_USER,
// SVC_GATEWAY_MAX_STREAMS_PER_ORG).
func (g *Gateway) WithMaxStreams(lim app.StreamLimits) *Gateway {
	if lim.PerPrincipal < 1 || lim.PerUser < 1 || lim.PerOrganization < 1 {
		panic("max streams must be positive")
	}
	g.streams.limits = lim
	return g
}

// WithStreamGauge reports the event streams this replica holds open on mp
// (svc_gateway_streams_open).
func (g *Gateway) WithStreamGauge(mp metric.MeterProvider) *Gateway {
	open, err := mp.Meter("svc.dev/services/gateway").Int64UpDownCounter("svc_gateway_streams_open",
		metric.WithDescription("Event streams this replica proxies now (each holds a slot under its principal's, user's and organization's ceilings)."),
		metric.WithUnit("{stream}"))
	if err != nil {
		panic(fmt.Sprintf("streams gauge: %v", err)) // only for an invalid name
	}
	open.Add(context.Background(), 0)
	g.streamsOpen = open
	return g
}

// WithStreamSlots counts the streams' slots across gateway replicas in slots.
func (g *Gateway) WithStreamSlots(slots app.StreamSlots) *Gateway {
	g.streams.shared = slots
	return g
}

// take takes a slot under each of id's ceilings for as long as ctx lives: shared across
// replicas when they can be counted there, else on this replica. It answers the ceiling that
// is full, nil when the slots were taken.
func (s *streams) take(ctx context.Context, log *slog.Logger, id internalauth.Identity) *app.StreamCeiling {
	ceilings := app.StreamCeilings(id, s.limits)
	if s.shared != nil {
		full, err := s.shared.Take(ctx, ceilings)
		if err == nil {
			return fullCeiling(ceilings, full)
		}
		log.WarnContext(ctx, "stream slots: counted on this replica alone", "err", err)
	}
	if full := s.acquire(ceilings); full >= 0 {
		return &ceilings[full]
	}
	context.AfterFunc(ctx, func() { s.release(ceilings) })
	return nil
}

// fullCeiling is ceilings[full], nil for -1 (taken).
func fullCeiling(ceilings []app.StreamCeiling, full int) *app.StreamCeiling {
	if full < 0 || full >= len(ceilings) {
		return nil
	}
	return &ceilings[full]
}

// serveStream proxies an event stream: a slot under each of id's ceilings while it is open
// (429 rate_limited past any of them), no write deadline (the server's WriteTimeout would cut
// it), and each event flushed as it comes (the proxy's FlushInterval -1; nothing buffers the
// answer).
func (g *Gateway) serveStream(w http.ResponseWriter, r *http.Request, id internalauth.Identity, proxy http.Handler) {
	ctx, done := context.WithCancel(r.Context())
	defer done() // the slots are given back
	if full := g.streams.take(ctx, g.log, id); full != nil {
		writeError(w, r, g.log, &streamsFullError{ceiling: *full})
		return
	}
	if g.streamsOpen != nil {
		g.streamsOpen.Add(ctx, 1)
		defer g.streamsOpen.Add(context.WithoutCancel(ctx), -1)
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	proxy.ServeHTTP(w, r.WithContext(ctx))
}
