package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

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
	Meter      metric.MeterProvider
	Propagator propagation.TextMapPropagator
	// Metrics serves the service's metrics in the Prometheus text format (GET /metrics).
	Metrics  http.Handler
	shutdown func(context.Context) error
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
	} else {
		// Nothing would ever read a recorded span: keep trace context (ids in logs, W3C
		// propagation to peers) but record nothing, which spares every request the cost.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	mp, metrics, err := newMeter(res)
	if err != nil {
		return Telemetry{}, err
	}
	return Telemetry{Tracer: tp, Meter: mp, Propagator: Propagator(), Metrics: metrics,
		shutdown: func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)) }}, nil
}

// newMeter builds a meter provider whose readings are pulled by a Prometheus scrape of the
// returned handler. The registry is the service's own, not the process-global default.
//
// The handler speaks OpenMetrics to a scraper that asks for it (Prometheus does by default):
// only that format carries exemplars, the trace id of a sampled span that recorded a counter
// or histogram value (the SDK's default trace-based filter keeps those of sampled spans only,
// so there are none while no OTLP exporter is configured). A plain GET still gets the classic
// text format.
func newMeter(res *resource.Resource) (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp))
	return mp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}), nil
}

// NewWithProvider wraps a tracer provider built elsewhere, such as one with an in-memory
// exporter in a test; metrics are kept but not exported.
func NewWithProvider(tp *sdktrace.TracerProvider) Telemetry {
	mp, metrics, err := newMeter(resource.Empty())
	if err != nil {
		panic(err) // only fails on bad options, a programmer error
	}
	return Telemetry{Tracer: tp, Meter: mp, Propagator: Propagator(), Metrics: metrics,
		shutdown: func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)) }}
}
