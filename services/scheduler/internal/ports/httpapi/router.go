// Package httpapi is the inbound HTTP port of scheduler: its public routes under /api, their
// DTOs and converters, and the table that maps domain errors to public codes.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	"svc.dev/libs/web"
	"svc.dev/services/scheduler/internal/app"
)

// NewRouter returns the router of scheduler's public routes. Paths it does not know answer a
// JSON 404, known paths with another method a JSON 405. Every route is guarded: the caller's
// organization comes from the signed identity the boot guard verified.
func NewRouter(application app.Application, log *slog.Logger) *mux.Router {
	h := handlers{app: application}
	rs := web.Responder{Log: log, Map: toAppError}
	r := web.NewRouter()
	r.Handle("/api/schedules", rs.Wrap(h.createSchedule)).Methods(http.MethodPost)
	r.Handle("/api/schedules", rs.Wrap(h.listSchedules)).Methods(http.MethodGet)
	// Before /api/schedules/{id}: "preview" is no schedule id.
	r.Handle("/api/schedules/preview", rs.Wrap(h.previewSchedule)).Methods(http.MethodGet)
	r.Handle("/api/schedules/{id}", rs.Wrap(h.getSchedule)).Methods(http.MethodGet)
	r.Handle("/api/schedules/{id}", rs.Wrap(h.updateSchedule)).Methods(http.MethodPatch)
	r.Handle("/api/schedules/{id}", rs.Wrap(h.deleteSchedule)).Methods(http.MethodDelete)
	r.Handle("/api/admin/tick", rs.Wrap(h.tick)).Methods(http.MethodPost)
	return r
}
