package service_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 14: bodies and signals answer what a model repairs from. An unknown member of the run
// or signal body names the member meant (did_you_mean), and a signal that no wait consumed
// says what the run waits for.
func TestRunAndSignalBodiesSayWhatWasMeant(t *testing.T) {
	t.Parallel()
	sys := start(t)
	b := sys.setup(t)
	b.workflow(t, "wf_hold", 1, def([]string{manual,
		`{"block_id":"hold","type":"wait","params":{"signal":"approve"}}`,
	}, edge("start", "hold")))

	issue := func(r response) map[string]any {
		t.Helper()
		require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
		require.Equal(t, "invalid_body", r.Body["error"], r.Raw)
		return r.Body["issues"].([]any)[0].(map[string]any)
	}
	for member, want := range map[string]string{"inputs": "input", "params": "input", "idempotency_key": "idempotencyKey"} {
		got := issue(b.do(t, "POST", "/api/workflows/wf_hold/run", map[string]any{member: map[string]any{"n": 1}}))
		require.Equal(t, "/"+member, got["path"])
		require.Equal(t, want, got["did_you_mean"], member)
	}
	require.NotContains(t, issue(b.do(t, "POST", "/api/workflows/wf_hold/run", map[string]any{"zzz": 1})), "did_you_mean",
		"no guess when nothing is near")

	id := b.startRun(t, "wf_hold", map[string]any{})
	got := issue(b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"signal": "approve"}))
	require.Equal(t, "name", got["did_you_mean"])
	got = issue(b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "approve", "data": 1}))
	require.Equal(t, "payload", got["did_you_mean"])

	b.waitStatus(t, id, "waiting")
	r := b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "aprove"})
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	require.Equal(t, false, r.Body["delivered"])
	require.Equal(t, []any{"approve"}, r.Body["waitingFor"])
	require.Equal(t, "approve", r.Body["did_you_mean"], "a misspelling of the name waited for")
	require.Contains(t, r.Body["message"], `the run waits for "approve"`)

	r = b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "shipped"})
	require.Equal(t, false, r.Body["delivered"])
	require.Equal(t, []any{"approve"}, r.Body["waitingFor"])
	require.NotContains(t, r.Body, "did_you_mean", "another name may be meant for a later wait: no guess")

	r = b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "approve"})
	require.Equal(t, true, r.Body["delivered"], r.Raw)
	require.NotContains(t, r.Body, "waitingFor")
	b.waitStatus(t, id, "completed")
}
