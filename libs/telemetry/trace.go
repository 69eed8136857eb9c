package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is what a service hands to every instrumented server, client and pool. It is
// passed explicitly rather than installed globally so that several services can live in one
// test process without sharing a provider.
type Telemetry struct {
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// Shutdown flushes and stops the exporter.
func (t Telemetry) Shutdown(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Propagator is W3C trace context plus baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// New builds the tracer provider for service. Spans are exported over OTLP/HTTP when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) variable is set, and dropped
// otherwise; the exporter reads its other OTEL_* settings itself.
func New(ctx context.Context, service, version string) (Telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return Telemetry{}, fmt.Errorf("telemetry resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return Telemetry{}, fmt.Errorf("otlp exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return Telemetry{Tracer: tp, Propagator: Propagator(), shutdown: tp.Shutdown}, nil
}

// NewWithProvider wraps a provider built elsewhere, such as one with an in-memory exporter in
// a test.
func NewWithProvider(tp *sdktrace.TracerProvider) Telemetry {
	return Telemetry{Tracer: tp, Propagator: Propagator(), shutdown: tp.Shutdown}
}
