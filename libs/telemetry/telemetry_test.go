package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc.dev/libs/telemetry"
)

func TestLoggerCarriesIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, "scheduler", slog.LevelInfo)
	tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
	ctx, span := tel.Tracer.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	ctx = telemetry.WithRequestID(ctx, "req_1")

	log.InfoContext(ctx, "hello", "n", 1)
	log.DebugContext(ctx, "below the level")

	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), "exactly one JSON line: %s", buf.String())
	require.Equal(t, "scheduler", rec["service"])
	require.Equal(t, "req_1", rec["request_id"])
	require.Equal(t, span.SpanContext().TraceID().String(), rec["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), rec["span_id"])
	require.Equal(t, "hello", rec["msg"])
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
	c, err := tel.Meter.Meter("test").Int64Counter("svc_test_things")
	require.NoError(t, err)
	c.Add(context.Background(), 3)

	rec := httptest.NewRecorder()
	tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	require.Contains(t, rec.Body.String(), "svc_test_things_total 3")
}

// TestRouteLabelsServerMetrics: the route WithRoute records labels the request's HTTP server
// metrics, so that alerts can select one route (deploy/prometheus: the start of a run); a
// request that matched no route has no route label.
func TestRouteLabelsServerMetrics(t *testing.T) {
	t.Parallel()
	tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
	h := otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/unrouted" {
			telemetry.WithRoute(r.Context(), r.Method, "/api/workflows/{id}/run")
		}
		w.WriteHeader(http.StatusAccepted)
	}), "test", otelhttp.WithMeterProvider(tel.Meter), otelhttp.WithTracerProvider(tel.Tracer))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/workflows/wf_1/run", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/unrouted", nil))
	// Outside an instrumented handler there is no labeler to add to: nothing happens.
	telemetry.WithRoute(context.Background(), "GET", "/x")

	rec := httptest.NewRecorder()
	tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var routed, unrouted bool
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if !strings.HasPrefix(line, "http_server_request_duration_seconds_count{") {
			continue
		}
		switch {
		case strings.Contains(line, `http_request_method="POST"`):
			require.Contains(t, line, `http_route="/api/workflows/{id}/run"`)
			require.Contains(t, line, `http_response_status_code="202"`)
			routed = true
		case strings.Contains(line, `http_request_method="GET"`):
			require.NotContains(t, line, "http_route=")
			unrouted = true
		}
	}
	require.True(t, routed && unrouted, "both requests counted:\n%s", rec.Body.String())
}

func TestParseLevel(t *testing.T) {
	t.Parallel()
	l, ok := telemetry.ParseLevel("warn")
	require.True(t, ok)
	require.Equal(t, slog.LevelWarn, l)
	_, ok = telemetry.ParseLevel("loud")
	require.False(t, ok)
}

// Without an exporter spans are not recorded, but they still carry ids for logs and peers.
func TestNoExporterKeepsContextOnly(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tel, err := telemetry.New(context.Background(), "test", "dev")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	_, span := tel.Tracer.Tracer("t").Start(context.Background(), "op")
	defer span.End()
	require.False(t, span.IsRecording())
	require.True(t, span.SpanContext().IsValid(), "a trace id still exists for logs and propagation")
}
