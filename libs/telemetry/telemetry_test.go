package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
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
