// Package http is the inbound HTTP port of scheduler: its public routes under /api, their
// DTOs and converters, and the table that maps domain errors to public codes.
package http

import (
	"github.com/gorilla/mux"

	"svc.dev/libs/web"
)

// NewRouter returns the router of scheduler's public routes. Paths it does not know answer a
// JSON 404, known paths with another method a JSON 405.
func NewRouter() *mux.Router {
	return web.NewRouter()
}
