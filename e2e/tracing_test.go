package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// A run's steps join the trace of the request that started it: whoever finds the POST /run in
// the trace store sees the gateway's hop, the orchestrator's handler, the editor call, and then
// the run being driven, one span per step attempt. Span names carry routes, never ids.
func TestRunStepsJoinTheDispatchTrace(t *testing.T) {
	t.Parallel()
	col := harness.NewCollector(t)
	sys := startIdentitySystem(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
		"SVC_RATE_LIMIT_PER_MINUTE":   "1000000",
	})
	u := newRunsUser(t, sys, "traced")
	wf := u.workflow("traced", wfDef(
		wfBlocks(wfTrigger(nil), wfBlock("hello", "log", map[string]any{"message": "hi"})),
		wfEdge("start", "hello")))

	const traceID = "5cf92f3577b34da6a3ce929d0e0e4737"
	id := u.startRun(wf, nil, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	u.waitStatus(id, "completed")

	want := []string{
		"gateway|POST /api/workflows/*/run",
		"run-orchestrator|svc-runtime drive",
		"run-orchestrator|step trigger.manual",
		"run-orchestrator|step log",
	}
	var spans []harness.Span
	have := map[string]harness.Span{}
	require.Eventually(t, func() bool {
		spans, have = nil, map[string]harness.Span{}
		for _, s := range col.Spans() {
			if s.TraceID == traceID {
				spans = append(spans, s)
				have[s.Service+"|"+s.Name] = s
			}
		}
		for _, w := range want {
			if _, ok := have[w]; !ok {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "spans of the trace: %v", names(spans))

	byID := map[string]harness.Span{}
	services := map[string]bool{}
	for _, s := range spans {
		byID[s.SpanID] = s
		services[s.Service] = true
		require.NotContains(t, s.Name, wf, "span names carry routes, not ids")
		require.NotContains(t, s.Name, id, "span names carry routes, not ids")
	}
	require.True(t, services["workflow-editor"], "the editor's snapshot call is in the trace: %v", names(spans))
	// Each step hangs off the drive span, which hangs off the dispatch (through the job).
	drive := have["run-orchestrator|svc-runtime drive"]
	for _, step := range []string{"run-orchestrator|step trigger.manual", "run-orchestrator|step log"} {
		require.Equal(t, drive.SpanID, have[step].ParentID, step)
	}
	parent, ok := byID[drive.ParentID]
	require.True(t, ok, "the drive span's parent is in the trace: %v", names(spans))
	require.Equal(t, "run-orchestrator", parent.Service)
}

func names(spans []harness.Span) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Service+"|"+s.Name)
	}
	return out
}
