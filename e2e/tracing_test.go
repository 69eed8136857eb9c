package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// A run's steps join the trace of the request that started it: whoever finds the POST /run in
// the trace store sees the gateway's hop, the orchestrator's handler, the editor call, and then
// the run being driven, one span per step attempt. A run that ends at its dispatch is run in a
// span of the dispatch ("svc-runtime run at dispatch"); one that needs a job is driven in the
// job's span ("svc-runtime drive"), which hangs off the dispatch through the job. Span names
// carry routes, never ids.
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
	waiting := u.workflow("traced-wait", wfDef(
		wfBlocks(wfTrigger(nil), wfBlock("pause", "wait", map[string]any{"duration": "10ms"}), wfBlock("hello", "log", map[string]any{"message": "hi"})),
		wfEdge("start", "pause"), wfEdge("pause", "hello")))

	for _, c := range []struct {
		name, wf, traceID, runSpan string
		steps                      []string
	}{
		{"ended at dispatch", wf, "5cf92f3577b34da6a3ce929d0e0e4737", "svc-runtime run at dispatch", []string{"step trigger.manual", "step log"}},
		{"driven by a job", waiting, "6df92f3577b34da6a3ce929d0e0e4738", "svc-runtime drive", []string{"step trigger.manual", "step wait"}},
	} {
		id := u.startRun(c.wf, nil, "traceparent", "00-"+c.traceID+"-00f067aa0ba902b7-01")
		u.waitStatus(id, "completed")

		// mget: the snapshot cache reads the organization's catalog epoch before it asks the editor.
		want := []string{"gateway|POST /api/workflows/*/run", "run-orchestrator|mget", "run-orchestrator|" + c.runSpan}
		for _, st := range c.steps {
			want = append(want, "run-orchestrator|"+st)
		}
		var spans []harness.Span
		have := map[string]harness.Span{}
		// Each process exports its spans on its own schedule: wait for the editor's too (its
		// snapshot call), not only for the gateway's and the orchestrator's.
		require.Eventually(t, func() bool {
			spans, have = nil, map[string]harness.Span{}
			editor := false
			for _, s := range col.Spans() {
				if s.TraceID == c.traceID {
					spans = append(spans, s)
					have[s.Service+"|"+s.Name] = s
					editor = editor || s.Service == "workflow-editor"
				}
			}
			for _, w := range want {
				if _, ok := have[w]; !ok {
					return false
				}
			}
			return editor
		}, 20*time.Second, 50*time.Millisecond, "%s: spans of the trace: %v", c.name, names(spans))

		byID := map[string]harness.Span{}
		services := map[string]bool{}
		for _, s := range spans {
			byID[s.SpanID] = s
			services[s.Service] = true
			require.NotContains(t, s.Name, c.wf, "span names carry routes, not ids")
			require.NotContains(t, s.Name, id, "span names carry routes, not ids")
		}
		require.True(t, services["workflow-editor"], "%s: the editor's snapshot call is in the trace: %v", c.name, names(spans))
		// Each step hangs off the span that ran the run, which hangs off the dispatch.
		runSpan := have["run-orchestrator|"+c.runSpan]
		for _, st := range c.steps {
			require.Equal(t, runSpan.SpanID, have["run-orchestrator|"+st].ParentID, "%s: %s", c.name, st)
		}
		parent, ok := byID[runSpan.ParentID]
		require.True(t, ok, "%s: the run span's parent is in the trace: %v", c.name, names(spans))
		require.Equal(t, "run-orchestrator", parent.Service, c.name)
	}
}

func names(spans []harness.Span) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Service+"|"+s.Name)
	}
	return out
}
