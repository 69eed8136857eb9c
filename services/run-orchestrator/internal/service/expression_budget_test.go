package service_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors/expression"
	"svc.dev/services/run-orchestrator/internal/service"
)

// attemptOf is the logged attempt of block in the run's logs (the last one).
func attemptOf(t *testing.T, logs []map[string]any, block string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, a := range logs {
		if a["block_id"] == block {
			found = a
		}
	}
	require.NotNil(t, found, "no attempt of %s in %v", block, logs)
	return found
}

// TestExpressionBombFailsItsAttemptOnly is issue 21's first finding through the engine: a
// transform whose value is a nested repeat asked the runtime for ~100 GB and the process died
// (fatal error: runtime: out of memory), with every organization's runs in it. Now the
// attempt fails with expression_budget_exceeded and the block id, and a run of another
// organization started beside it completes.
func TestExpressionBombFailsItsAttemptOnly(t *testing.T) {
	t.Parallel()
	sys := start(t)
	hostile, quiet := sys.setup(t), sys.setup(t)
	hostile.workflow(t, "wf_bomb", 1, def([]string{manual,
		`{"block_id":"bomb","type":"transform","params":{"value":"{{ repeat(repeat('a', 999999), 100000) }}"}}`,
	}, edge("start", "bomb")))
	quiet.workflow(t, "wf_quiet", 1, def([]string{manual,
		`{"block_id":"add","type":"transform","params":{"value":"{{ input.n + 1 }}"}}`,
		`{"block_id":"say","type":"log","params":{"message":"n is {{ steps.add.output }}"}}`,
	}, edge("start", "add"), edge("add", "say")))

	var wg sync.WaitGroup
	var bombRun, quietRun string
	wg.Go(func() { bombRun = hostile.startRun(t, "wf_bomb", nil) })
	wg.Go(func() { quietRun = quiet.startRun(t, "wf_quiet", map[string]any{"input": map[string]any{"n": 41}}) })
	wg.Wait()

	quiet.waitStatus(t, quietRun, "completed")
	require.Equal(t, "n is 42", attemptOf(t, quiet.logs(t, quietRun), "say")["output"].(map[string]any)["message"])

	failed := hostile.waitStatus(t, bombRun, "failed")
	require.Equal(t, "bomb", failed["error"].(map[string]any)["block_id"])
	a := attemptOf(t, hostile.logs(t, bombRun), "bomb")
	require.Equal(t, "failed", a["status"])
	errBody := a["error"].(map[string]any)
	require.Equal(t, expression.CodeBudgetExceeded, errBody["code"], errBody)
	require.Contains(t, errBody["message"], "allocate more than")
}

// TestLongEvaluationLeavesTheRequestAndTheTransaction is the second finding: a reduce inside
// a reduce over a 15,000-element input kept POST /run open 6.5 s (runs of inline blocks are
// run in their start request, and params are resolved in the step's transaction). Now the
// start answers 202 at once, having left the attempt to a worker, which evaluates it outside
// any transaction under the full budget and fails it with expression_budget_exceeded. A run
// whose evaluation goes over the small inline budget but not the full one completes through a
// job, its attempt's recorded input the resolved params.
func TestLongEvaluationLeavesTheRequestAndTheTransaction(t *testing.T) {
	t.Parallel()
	sys := startWith(t, func(c *service.Config) { c.Expressions.Full.Timeout = 300 * time.Millisecond })
	b := sys.setup(t)
	b.workflow(t, "wf_square", 1, def([]string{manual,
		`{"block_id":"square","type":"transform","params":{"value":"{{ reduce(input.a, reduce(input.a, #acc + 1, 0), 0) }}"}}`,
	}, edge("start", "square")))
	b.workflow(t, "wf_sum", 1, def([]string{manual,
		`{"block_id":"sum","type":"transform","params":{"value":{"sum":"{{ reduce(input.a, #acc + #, 0) }}","label":"sum of {{ len(input.a) }}"}}}`,
	}, edge("start", "sum")))

	items := make([]int, 15000)
	for i := range items {
		items[i] = 1
	}
	body := map[string]any{"input": map[string]any{"a": items}}

	begun := time.Now()
	r := b.do(t, "POST", "/api/workflows/wf_square/run", body)
	took := time.Since(begun)
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	require.Less(t, took, time.Second, "the start waited for the evaluation")
	square := r.Body["runId"].(string)

	begun = time.Now()
	sum := b.startRun(t, "wf_sum", body)
	require.Less(t, time.Since(begun), time.Second)

	b.waitStatus(t, sum, "completed")
	a := attemptOf(t, b.logs(t, sum), "sum")
	resolved := map[string]any{"sum": float64(15000), "label": "sum of 15000"}
	require.Equal(t, resolved, a["output"])
	require.Equal(t, map[string]any{"value": resolved}, a["input"], "the recorded input is the resolved one")

	b.waitStatus(t, square, "failed")
	a = attemptOf(t, b.logs(t, square), "square")
	require.Equal(t, expression.CodeBudgetExceeded, a["error"].(map[string]any)["code"], a["error"])
	require.Contains(t, a["error"].(map[string]any)["message"], "took more than 300ms")
}
