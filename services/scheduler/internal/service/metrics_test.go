package service_test

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// TestMetrics scrapes the service's own /metrics (docs/METRICS.md): the fires are counted by
// outcome (fired, failed for good, left for a retry) and each fired one's lateness, its
// dispatch minus its due time on the service's clock, is recorded.
func TestMetrics(t *testing.T) {
	t.Parallel()
	sys := start(t, nil)
	b := sys.setup(t)
	wf := b.workflow(t)
	gone := b.workflow(t)
	for range 2 {
		b.create(t, map[string]any{"workflowId": wf, "cron": "@hourly"})
	}
	b.create(t, map[string]any{"workflowId": gone, "cron": "@hourly"})
	b.deleteWorkflow(gone)

	s := scrape(t, sys.url)
	require.Contains(t, s, "svc_schedule_fires_total")
	require.NotEmpty(t, s["svc_schedule_fires_total"].GetHelp())
	for _, outcome := range []string{"fired", "failed", "retried"} {
		require.Zero(t, counter(s["svc_schedule_fires_total"], "outcome", outcome), outcome)
	}

	// Due at 11:00, fired at 11:00:05 by the service's clock.
	sys.clock.Set(time.Date(2026, 11, 22, 11, 0, 5, 0, time.UTC))
	r := b.tick(t)
	require.Len(t, items(t, r.Body["fired"]), 2, r.Raw)
	// Due at 12:00 with the orchestrator down: both stay in the outbox.
	sys.orchestrator.down.Store(true)
	sys.clock.Set(time.Date(2026, 11, 22, 12, 0, 1, 0, time.UTC))
	b.tick(t)

	s = scrape(t, sys.url)
	fires := s["svc_schedule_fires_total"]
	require.InDelta(t, 2, counter(fires, "outcome", "fired"), 0)
	require.InDelta(t, 1, counter(fires, "outcome", "failed"), 0, "the workflow is gone")
	require.InDelta(t, 2, counter(fires, "outcome", "retried"), 0)
	late := s["svc_schedule_fire_lateness_seconds"]
	require.NotNil(t, late, "the lateness histogram is listed")
	require.NotEmpty(t, late.GetHelp())
	require.Len(t, late.GetMetric(), 1)
	h := late.GetMetric()[0].GetHistogram()
	require.EqualValues(t, 2, h.GetSampleCount())
	require.InDelta(t, 10, h.GetSampleSum(), 1e-9, "5 s late each")
}

// scrape reads the service's /metrics in the Prometheus text format.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics") //nolint:noctx // a test's local scrape
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// counter is the value of f's series with label name=value.
func counter(f *dto.MetricFamily, name, value string) float64 {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
