// Package httpapi is the inbound HTTP port of webhook-ingress: /api/webhooks/* matched against the
// route registry, the request turned into a route.Request and delivered through the
// application, and the one table that maps the use case's errors to public codes.
package httpapi

import (
	"log/slog"

	"github.com/gorilla/mux"
	"go.opentelemetry.io/otel/metric"

	"svc.dev/libs/web"
	"svc.dev/services/webhook-ingress/internal/app"
	"svc.dev/services/webhook-ingress/internal/domain/route"
)

// Prefix is where the webhook routes live; route paths are relative to it.
const Prefix = "/api/webhooks"

// NewRouter returns the router of webhook-ingress's public routes: every path under
// /api/webhooks/ goes to the registry (an unmatched path answers 404 not_found, a path
// registered for another method 405 method_not_allowed); other /api paths answer a JSON 404.
// Every delivery is counted on mp (svc_webhook_deliveries_total, deliveries.go).
func NewRouter(registry *route.Registry, application app.Application, mp metric.MeterProvider, log *slog.Logger) *mux.Router {
	if registry == nil || mp == nil {
		panic("nil registry or meter provider")
	}
	h := handlers{registry: registry, app: application, deliveries: newDeliveryCounter(mp)}
	rs := web.Responder{Log: log, Map: toAppError}
	r := web.NewRouter()
	r.PathPrefix(Prefix + "/").Handler(rs.Wrap(h.deliverWebhook))
	return r
}

// Routes lists the registered routes as "METHOD /api/webhooks/path/{param}", the form of the
// OpenAPI document, for the test that holds the two together.
func Routes(registry *route.Registry) []string {
	var out []string
	for _, e := range registry.Entries() {
		out = append(out, e.Route.Method+" "+Prefix+e.Template.OpenAPIPath())
	}
	return out
}
