package run_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// BenchmarkChainStep is the interpreter's cost of one step of a chain (a result applied and
// the next block's attempt begun), by chain length: per-block storage keeps the engine's
// per-step cost flat, and the interpreter must not grow with the run either.
func BenchmarkChainStep(b *testing.B) {
	for _, n := range []int{40, 400} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			blocks := []run.Block{{ID: "b0", Type: "trigger.manual", Params: map[string]any{}}}
			var edges []run.Edge
			for i := 1; i < n; i++ {
				blocks = append(blocks, run.Block{ID: fmt.Sprintf("b%d", i), Type: "log", Params: map[string]any{"message": "{{ input.n }}"}})
				edges = append(edges, run.Edge{From: fmt.Sprintf("b%d", i-1), To: fmt.Sprintf("b%d", i)})
			}
			raw, _ := json.Marshal(map[string]any{"blocks": blocks, "edges": edges})
			def, err := run.ParseDefinition(raw)
			if err != nil {
				b.Fatal(err)
			}
			ids := 0
			in := run.NewInterpreter(map[string]run.Connector{"log": {Retry: run.RetryPolicy{MaxAttempts: 1}}, "trigger.manual": {}},
				run.NewTemplates(run.EvalLimits{}), func() string { ids++; return "att_" + strconv.Itoa(ids) })
			now := time.Unix(0, 0)
			out := json.RawMessage(`{"message":"1"}`)
			b.ResetTimer()
			for b.Loop() {
				r := &run.Run{ID: "run", Def: def, Input: map[string]any{"n": 1}, State: run.NewState(), Status: run.StatusQueued}
				o, err := in.Apply(r, run.Advance{JobEvent: run.JobEvent{Job: 1, Try: 1}, Now: now})
				for err == nil && o.Start != nil {
					o, err = in.Apply(r, run.Succeeded{JobEvent: run.JobEvent{Job: 1, Try: 1}, Block: o.Start.Block.ID, AttemptID: o.Start.ID, Output: out, Now: now})
				}
				if err != nil || r.Status != run.StatusCompleted {
					b.Fatalf("run ended %s: %v", r.Status, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/step")
		})
	}
}
