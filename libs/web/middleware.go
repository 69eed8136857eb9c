package web

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/gorilla/mux"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"svc.dev/libs/telemetry"
	"svc.dev/proto/errs"
)

// MaxBodyBytes is the largest request body any public route accepts (docs/API.md, Limits).
const MaxBodyBytes = 1 << 20

// MaxRPCBodyBytes is the largest request body of an internal RPC: a webhook's run input is a
// delivery of up to MaxBodyBytes wrapped in a few members, and a batch of schedule fires
// carries many inputs.
const MaxRPCBodyBytes = 16 << 20

// RequestIDHeader carries the request id in both directions.
const RequestIDHeader = "X-Request-Id"

// Middleware wraps a handler.
type Middleware func(http.Handler) http.Handler

// Chain applies mws so that the first one is the outermost.
func Chain(h http.Handler, mws ...Middleware) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// RequestID echoes a sane X-Request-Id from the client or makes one, and puts it on the
// response and into the request context (where the logger finds it).
func RequestID() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(RequestIDHeader)
			if !saneRequestID(id) {
				id = newRequestID()
				r.Header.Set(RequestIDHeader, id)
			}
			w.Header().Set(RequestIDHeader, id)
			next.ServeHTTP(w, r.WithContext(telemetry.WithRequestID(r.Context(), id)))
		})
	}
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "req_" + hex.EncodeToString(b[:])
}

// Recover turns a panic into a logged 500 internal error instead of a dropped connection.
func Recover(log *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
						panic(v)
					}
					log.ErrorContext(r.Context(), "panic", "value", v, "stack", string(debug.Stack()))
					WriteJSON(w, http.StatusInternalServerError, errs.New(errs.InternalOnlyLog, nil).Body())
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// BodyLimit refuses bodies over limit bytes: at once when Content-Length says so, and while
// reading otherwise (Decode turns that into payload_too_large).
func BodyLimit(limit int64) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				WriteJSON(w, http.StatusRequestEntityTooLarge, errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", limit).Body())
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

// Trace starts a server span per request, continuing the caller's W3C trace context. Span
// names are the route template when the router matched one, so that ids do not explode the
// number of span names.
func Trace(tel telemetry.Telemetry, operation string) Middleware {
	return func(next http.Handler) http.Handler {
		return otelhttp.NewHandler(next, operation,
			otelhttp.WithTracerProvider(tel.Tracer),
			otelhttp.WithMeterProvider(tel.Meter),
			otelhttp.WithPropagators(tel.Propagator),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
				if route := mux.CurrentRoute(r); route != nil {
					if tpl, err := route.GetPathTemplate(); err == nil {
						return r.Method + " " + tpl
					}
				}
				return r.Method + " " + operation
			}),
		)
	}
}

// statusRecorder remembers the status written, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// AccessLog logs one line per request at debug level (info for 5xx answers).
func AccessLog(log *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			level := slog.LevelDebug
			if rec.status >= http.StatusInternalServerError {
				level = slog.LevelInfo
			}
			log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path,
				"status", rec.status, "duration_ms", time.Since(start).Milliseconds())
		})
	}
}

// Standard is the chain every service puts in front of its router: request id, tracing,
// access log, recovery, and the header and body limits.
func Standard(log *slog.Logger, tel telemetry.Telemetry, service string) []Middleware {
	return append(Edge(log, tel, service), BodyLimit(MaxBodyBytes))
}

// Edge is Standard without the body limit, for a server that sets it per route: a service's
// internal RPCs (MaxRPCBodyBytes) carry what a public request brought plus their own members,
// so the public limit would refuse a request the gateway let through.
func Edge(log *slog.Logger, tel telemetry.Telemetry, service string) []Middleware {
	return []Middleware{RequestID(), Trace(tel, service), AccessLog(log), Recover(log), HeaderLimit(MaxHeaderBytes)}
}

// MaxHeaderBytes is the most a request's target and headers may take together. The server
// reads up to maxHeaderRead before net/http itself would refuse with a plain-text 431, so
// that between the two the answer is this service's JSON one.
const (
	MaxHeaderBytes = 64 << 10
	maxHeaderRead  = 1 << 20
)

// HeaderLimit refuses a request whose target and headers take more than limit bytes, with
// 413 payload_too_large (the contract's code for a request too large), and a message that
// says it is the headers.
func HeaderLimit(limit int) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := len(r.Method) + len(r.RequestURI) + len(r.Host)
			for k, vs := range r.Header {
				for _, v := range vs {
					n += len(k) + len(v) + 4 // ": " and CRLF
				}
			}
			if n > limit {
				WriteJSON(w, http.StatusRequestEntityTooLarge, errs.Newf(errs.PayloadTooLarge,
					"the request's headers and target take %d bytes; at most %d are read", n, limit).Body())
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
