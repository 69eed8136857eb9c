package telemetry

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

type routeKey struct{}

// WithRoute records the route a request matched (a template such as
// "/api/workflows/{id}/run", never the raw path), names the request's server span after it
// ("POST /api/workflows/{id}/run") and returns a context that carries it, so a client span
// made for the request (the gateway's proxy hop) is named after the route too. Span names
// stay few: ids never reach them. The route also labels the request's HTTP server metrics
// (http_route on http_server_request_duration_seconds), which is what lets a dashboard or an
// alert single out one route, such as the start of a run.
func WithRoute(ctx context.Context, method, route string) context.Context {
	span := trace.SpanFromContext(ctx)
	span.SetName(method + " " + route)
	span.SetAttributes(attribute.String("http.route", route))
	if l, ok := otelhttp.LabelerFromContext(ctx); ok {
		l.Add(attribute.String("http.route", route))
	}
	return context.WithValue(ctx, routeKey{}, route)
}

// Route is the route WithRoute recorded, or "".
func Route(ctx context.Context) string {
	r, _ := ctx.Value(routeKey{}).(string)
	return r
}

// ChildSpansOnly wraps a tracer provider so that it records only spans that continue a trace:
// work started by no request (River's polling, the heartbeat, timers) makes no trace of its
// own. Given to the Postgres pool's tracer, it keeps background SQL out of the trace store
// while every query a request or a traced step makes still appears in its trace.
func ChildSpansOnly(tp trace.TracerProvider) trace.TracerProvider {
	return childOnlyProvider{TracerProvider: tp}
}

type childOnlyProvider struct {
	trace.TracerProvider
}

func (p childOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{next: p.TracerProvider.Tracer(name, opts...)}
}

type childOnlyTracer struct {
	embedded.Tracer
	next trace.Tracer
}

func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// The context's own span: with no valid span context it is a no-op that records and
		// exports nothing.
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.next.Start(ctx, name, opts...)
}
