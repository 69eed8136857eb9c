package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestMetrics scrapes the real /metrics of run-orchestrator, webhook-ingress and the gateway
// (docs/METRICS.md): every series of the contract is listed with its help text, and each moves
// as the system works: runs started and finished, attempts failed and retried, the queue's
// wait, a run waiting on a signal, a sleep's timer, webhook deliveries new, duplicate and
// refused, the gateway's guard cache, its open streams and its rate limiting. The scheduler's
// series are covered by its own service test (TestMetrics in services/scheduler), where its
// clock can be moved.
func TestMetrics(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"})
	orch := sys.URLs[harness.Orchestrator] + "/metrics"
	hooks := sys.URLs[harness.Webhook] + "/metrics"
	gateway := sys.AdminURL + "/metrics"

	u := newRunsUser(t, sys, "metrics")
	before := scrapeMetrics(t, orch)

	// Runs started by hand, each with a block that fails once and succeeds on its retry: a job
	// drives each (a failure is never run inline), so each is queued, started by a worker,
	// retried and completed.
	const n = 5
	flaky := u.workflow("flaky", wfDef(
		wfBlocks(wfTrigger(nil), wfBlock("flaky", "fail", map[string]any{"message": "once", "fail_attempts": 1})),
		wfEdge("start", "flaky")))
	var ids []string
	for range n {
		ids = append(ids, u.startRun(flaky, nil))
	}
	for _, id := range ids {
		u.waitStatus(id, "completed")
	}
	after := waitMetrics(t, orch, "the runs' ends counted", func(s metricsScrape) bool {
		return s.value("svc_runs_finished_total", "status", "completed")-before.value("svc_runs_finished_total", "status", "completed") >= n
	})
	delta := func(name string, labels ...string) float64 {
		return after.value(name, labels...) - before.value(name, labels...)
	}
	require.InDelta(t, n, delta("svc_runs_started_total", "trigger", "manual"), 0)
	require.InDelta(t, 0, delta("svc_runs_started_total", "trigger", "webhook"), 0)
	require.InDelta(t, n, delta("svc_runs_finished_total", "status", "completed"), 0)
	require.InDelta(t, 0, delta("svc_runs_finished_total", "status", "failed"), 0)
	require.InDelta(t, n, delta("svc_attempts_total", "type", "fail", "outcome", "failed"), 0)
	require.InDelta(t, n, delta("svc_attempts_total", "type", "fail", "outcome", "succeeded"), 0)
	require.InDelta(t, n, delta("svc_retries_scheduled_total", "type", "fail"), 0)
	require.InDelta(t, 2*n, delta("svc_attempt_duration_seconds", "type", "fail"), 0, "each counted attempt's call is timed once")
	require.GreaterOrEqual(t, delta("svc_attempt_schedule_to_start_seconds"), float64(n), "every queued job's wait, and every retry's")
	require.InDelta(t, 0, delta("svc_attempts_lost_total"), 0)
	require.Positive(t, after.value("svc_workers_max"))

	// A run waiting on a signal shows in the waiting runs (read from the database, system
	// wide), and leaves them once signalled.
	gated := u.workflow("gated", wfDef(
		wfBlocks(wfTrigger(nil), wfBlock("gate", "wait", map[string]any{"signal": "go"})),
		wfEdge("start", "gate")))
	gatedRun := u.startRun(gated, nil)
	u.pollRun(gatedRun, "waiting at gate", waitingAt("gate", "signal"))
	waitMetrics(t, orch, "the signal wait counted", func(s metricsScrape) bool {
		return s.value("svc_runs_waiting", "kind", "signal") == 1
	})
	r := u.c.post("/api/runs/"+gatedRun+"/signals", map[string]any{"name": "go"})
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	u.waitStatus(gatedRun, "completed")
	waitMetrics(t, orch, "the signal wait gone", func(s metricsScrape) bool {
		return s.value("svc_runs_waiting", "kind", "signal") == 0
	})

	// A sleep is released by its timer, which says how late it came.
	napping := u.workflow("napping", wfDef(
		wfBlocks(wfTrigger(nil), wfBlock("nap", "wait", map[string]any{"duration": "300ms"})),
		wfEdge("start", "nap")))
	lateBefore := scrapeMetrics(t, orch).value("svc_timer_lateness_seconds")
	u.waitStatus(u.startRun(napping, nil), "completed")
	waitMetrics(t, orch, "the sleep's lateness recorded", func(s metricsScrape) bool {
		return s.value("svc_timer_lateness_seconds") == lateBefore+1
	})

	// Every series of the contract is listed, with its help text.
	final := waitMetrics(t, orch, "the queue read", func(s metricsScrape) bool {
		return s.has("svc_queue_depth") && s.has("svc_runs_waiting")
	})
	requireHelp(t, final, "svc_runs_started_total", "svc_runs_finished_total", "svc_runs_waiting", "svc_attempts_total",
		"svc_attempt_duration_seconds", "svc_attempt_schedule_to_start_seconds", "svc_attempts_lost_total",
		"svc_retries_scheduled_total", "svc_queue_depth", "svc_queue_oldest_age_seconds", "svc_workers_busy", "svc_workers_max",
		"svc_timer_lateness_seconds", "svc_retention_runs_deleted_total", "svc_retention_batches_total")
	for _, kind := range []string{"signal", "sleep", "worker"} {
		require.True(t, final.hasSeries("svc_runs_waiting", "kind", kind), "svc_runs_waiting{kind=%q}", kind)
	}
	require.InDelta(t, 0, final.value("svc_queue_oldest_age_seconds"), 60, "nothing is queued for long")

	// Webhook deliveries: a new one, its redelivery, one badly signed, one to no route.
	org, _ := obj(t, u.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"].(string)
	u.workflow("on-event", wfDef(
		wfBlocks(wfBlock("start", "trigger.webhook", map[string]any{}), wfBlock("say", "log", map[string]any{"message": "hi"})),
		wfEdge("start", "say")))
	first := sys.Processes(harness.Webhook)
	first[0].Stop(t)
	sys.Run(t, harness.Webhook, map[string]string{
		"SVC_WEBHOOK_STANDARD_SECRET": whStandardSecret, "SVC_WEBHOOK_STANDARD_ORG": orgSlug(t, u.c, org), "SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
	})
	hooksBefore := scrapeMetrics(t, hooks)
	startedBefore := scrapeMetrics(t, orch).value("svc_runs_started_total", "trigger", "webhook")
	body := `{"type":"metrics.test"}`
	for range 2 { // the second is a redelivery: same id, same body
		d := deliverStandard(t, sys, "billing", "msg_metrics_1", time.Now(), body)
		require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	}
	wrong := "whsec_" + base64.StdEncoding.EncodeToString([]byte("not the route's secret, at all"))
	requireError(t, send(t, sys, "/api/webhooks/events/billing", "application/json", body, standardHeaders("msg_metrics_2", time.Now(), body, wrong)...),
		http.StatusUnauthorized, "invalid_signature")
	requireError(t, send(t, sys, "/api/webhooks/no-such-route", "application/json", body), http.StatusNotFound, "not_found")
	hooksAfter := scrapeMetrics(t, hooks)
	hookDelta := func(result, reason string) float64 {
		return hooksAfter.value("svc_webhook_deliveries_total", "result", result, "reason", reason) -
			hooksBefore.value("svc_webhook_deliveries_total", "result", result, "reason", reason)
	}
	require.InDelta(t, 1, hookDelta("new", ""), 0)
	require.InDelta(t, 1, hookDelta("duplicate", ""), 0)
	require.InDelta(t, 1, hookDelta("refused", "bad_signature"), 0)
	require.InDelta(t, 1, hookDelta("refused", "unknown_hook"), 0)
	requireHelp(t, hooksAfter, "svc_webhook_deliveries_total")
	waitMetrics(t, orch, "the webhook's run counted", func(s metricsScrape) bool {
		return s.value("svc_runs_started_total", "trigger", "webhook") == startedBefore+1
	})

	// The gateway: the guard cache answered the requests above, and an event stream is open
	// while it is read.
	gw := scrapeMetrics(t, gateway)
	require.Positive(t, gw.value("svc_gateway_guard_cache_total", "result", "hit"))
	require.Positive(t, gw.value("svc_gateway_guard_cache_total", "result", "miss"))
	require.InDelta(t, 0, gw.value("svc_gateway_streams_open"), 0)
	ctx, cancel := context.WithCancel(harness.Context(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sys.BaseURL+"/api/runs/events", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+u.c.token)
	req.Header.Set("Origin", testOrigin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, _ = bufio.NewReader(resp.Body).Peek(1) // the stream is flowing
	waitMetrics(t, gateway, "the stream counted open", func(s metricsScrape) bool { return s.value("svc_gateway_streams_open") == 1 })
	cancel()
	_ = resp.Body.Close()
	gw = waitMetrics(t, gateway, "the stream counted closed", func(s metricsScrape) bool { return s.value("svc_gateway_streams_open") == 0 })
	requireHelp(t, gw, "svc_gateway_rate_limited_total", "svc_gateway_guard_cache_total", "svc_gateway_streams_open")

	// Rate limiting: a gateway with a bucket of 2 refuses the third request.
	sys.Processes(harness.Gateway)[0].Stop(t)
	sys.Run(t, harness.Gateway, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "2"})
	require.InDelta(t, 0, scrapeMetrics(t, gateway).value("svc_gateway_rate_limited_total"), 0)
	limited := 0
	for range 5 {
		if u.c.get("/api/runs/"+gatedRun).Status == http.StatusTooManyRequests {
			limited++
		}
	}
	require.Positive(t, limited)
	require.InDelta(t, limited, scrapeMetrics(t, gateway).value("svc_gateway_rate_limited_total"), 0)
}

// metricsScrape is one scrape of a /metrics endpoint, by metric family.
type metricsScrape map[string]*dto.MetricFamily

// scrapeMetrics reads url in the Prometheus text format.
func scrapeMetrics(t *testing.T, url string) metricsScrape {
	t.Helper()
	req, err := http.NewRequestWithContext(harness.Context(t), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, url)
	return fams
}

// waitMetrics scrapes url until ok accepts a scrape (30 s at most) and returns it.
func waitMetrics(t *testing.T, url, what string, ok func(metricsScrape) bool) metricsScrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := scrapeMetrics(t, url)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s; last scrape: %s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// value sums the series of family name whose labels hold every (name, value) pair of labels:
// a counter's or gauge's value, a histogram's count. A missing series is 0.
func (s metricsScrape) value(name string, labels ...string) float64 {
	f, ok := s[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func (s metricsScrape) has(name string) bool { _, ok := s[name]; return ok }

// hasSeries reports whether family name has a series with every pair of labels.
func (s metricsScrape) hasSeries(name string, labels ...string) bool {
	for _, m := range s[name].GetMetric() {
		if matches(m, labels) {
			return true
		}
	}
	return false
}

// matches reports whether m's labels hold every (name, value) pair of labels; a label absent
// from m has the value "" (as Prometheus sees it).
func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] {
				got = l.GetValue()
			}
		}
		if got != labels[i+1] {
			return false
		}
	}
	return true
}

func (s metricsScrape) String() string {
	var b strings.Builder
	for name, f := range s {
		if strings.HasPrefix(name, "svc_") {
			fmt.Fprintf(&b, "%s: %d series; ", name, len(f.GetMetric()))
		}
	}
	return b.String()
}

// requireHelp requires each family of names to be listed with a help text.
func requireHelp(t *testing.T, s metricsScrape, names ...string) {
	t.Helper()
	for _, name := range names {
		f, ok := s[name]
		require.True(t, ok, "%s is not listed", name)
		require.NotEmpty(t, f.GetHelp(), "%s has no help text", name)
	}
}
