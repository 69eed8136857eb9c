// Package web is the HTTP plumbing every service shares: a server with timeouts and graceful
// shutdown, the middleware chain (request id, recovery, body limit, tracing, access log), JSON
// decoding that reports invalid_body issues, JSON 404/405, and the /health and /ready handlers.
package web

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"svc.dev/proto/errs"
)

// WriteJSON writes v as the JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // bodies are read by programs, not pasted into HTML
	_ = enc.Encode(v)        // the client went away; nothing left to tell it
}

// WriteError writes err as a public error. Causes of 5xx errors are logged, never sent.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := errs.From(err)
	if e.Status() >= http.StatusInternalServerError {
		log.ErrorContext(r.Context(), "request failed", "code", string(e.Code), "err", e.Error(),
			"method", r.Method, "path", r.URL.Path)
	}
	WriteJSON(w, e.Status(), e.Body())
}

// Responder adapts handlers that return an error, passing each error through the service's
// own error table (Map) exactly once.
type Responder struct {
	Log *slog.Logger
	// Map turns a domain error into a public one; nil means errs.From.
	Map func(error) *errs.Error
}

// HandlerFunc is a handler that reports failure by returning an error.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Wrap returns an http.HandlerFunc that writes h's error, if any.
func (rs Responder) Wrap(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			if rs.Map != nil {
				err = rs.Map(err)
			}
			WriteError(w, r, rs.Log, err)
		}
	}
}
