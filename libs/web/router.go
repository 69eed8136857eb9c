package web

import (
	"net/http"

	"github.com/gorilla/mux"

	"svc.dev/libs/errs"
)

// NewRouter returns a router whose misses answer in JSON: 404 not_found for an unknown path
// and 405 method_not_allowed for a known path with another method.
func NewRouter() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(NotFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusMethodNotAllowed, errs.New(errs.MethodNotAllowed, nil).Body())
	})
	return r
}

// NotFound answers 404 not_found.
func NotFound(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusNotFound, errs.New(errs.NotFound, nil).Body())
}
