package web

import (
	"net/http"

	"github.com/gorilla/mux"

	"svc.dev/libs/telemetry"
	"svc.dev/proto/errs"
)

// NewRouter returns a router whose misses answer in JSON: 404 not_found for an unknown path
// and 405 method_not_allowed for a known path with another method.
func NewRouter() *mux.Router {
	r := mux.NewRouter()
	r.Use(nameRoute)
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

// Routes lists a router's routes as "METHOD /path/{template}", one per method, for tests
// that hold a router to the OpenAPI document.
func Routes(r *mux.Router) []string {
	var out []string
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil //nolint:nilerr // a route without a path (a matcher-only subrouter) lists nothing
		}
		methods, err := route.GetMethods()
		if err != nil {
			methods = []string{"ANY"}
		}
		for _, m := range methods {
			out = append(out, m+" "+tpl)
		}
		return nil
	})
	return out
}

// nameRoute names the request's server span after the route it matched (its template, such
// as "/api/runs/{runId}"): the span starts before routing, under the service's name.
func nameRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route := mux.CurrentRoute(r); route != nil {
			if tpl, err := route.GetPathTemplate(); err == nil {
				r = r.WithContext(telemetry.WithRoute(r.Context(), r.Method, tpl))
			}
		}
		next.ServeHTTP(w, r)
	})
}
