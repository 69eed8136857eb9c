// Package httpapi is the inbound HTTP port of workflow-editor: its public routes under /api, their
// DTOs and converters, the ops decoder, and the table that maps domain errors to public codes.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	"svc.dev/libs/web"
	"svc.dev/services/workflow-editor/internal/app"
)

// NewRouter returns the router of workflow-editor's public routes. Paths it does not know answer a
// JSON 404, known paths with another method a JSON 405. Every route is guarded: the caller's
// organization comes from the signed identity the boot guard verified.
func NewRouter(application app.Application, log *slog.Logger) *mux.Router {
	h := handlers{app: application}
	rs := web.Responder{Log: log, Map: toAppError}
	r := web.NewRouter()
	r.Handle("/api/workflows", rs.Wrap(h.createWorkflow)).Methods(http.MethodPost)
	r.Handle("/api/workflows", rs.Wrap(h.listWorkflows)).Methods(http.MethodGet)
	r.Handle("/api/workflows/{id}", rs.Wrap(h.getWorkflow)).Methods(http.MethodGet)
	r.Handle("/api/workflows/{id}", rs.Wrap(h.describeWorkflow)).Methods(http.MethodPatch)
	r.Handle("/api/workflows/{id}", rs.Wrap(h.deleteWorkflow)).Methods(http.MethodDelete)
	r.Handle("/api/workflows/{id}/operations", rs.Wrap(h.editWorkflow)).Methods(http.MethodPost)
	r.Handle("/api/connectors", rs.Wrap(h.listConnectors)).Methods(http.MethodGet)
	return r
}
