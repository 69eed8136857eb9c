package service_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"svc.dev/services/run-orchestrator/internal/service"
)

// BenchmarkChain measures one run of a linear workflow of n no-op blocks from dispatch to
// completed, in process (the HTTP dispatch and River included; the gateway and the editor's
// network hop are not): the engine's own cost per block, for profiling with -cpuprofile. The
// system-level numbers are tools/bench's chain scenarios.
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{40, 400} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			sys := startWith(b, func(c *service.Config) { c.Workers = 100 })
			bundle := sys.setup(b)
			bundle.workflow(b, "wf_chain", 1, chainDef(n))
			pool := db(b, sys.dbURL)
			b.ResetTimer()
			for b.Loop() {
				id := bundle.startRun(b, "wf_chain", nil)
				for status := ""; status != "completed"; time.Sleep(time.Millisecond) {
					if err := pool.QueryRow(b.Context(), `SELECT status FROM orchestrator.runs WHERE id = $1`, id).Scan(&status); err != nil {
						b.Fatal(err)
					}
					if status == "failed" {
						b.Fatalf("run %s failed", id)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/run")
		})
	}
}

func chainDef(n int) string {
	blocks := []string{manual}
	var edges []string
	prev := "start"
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("b%d", i)
		blocks = append(blocks, `{"block_id":"`+id+`","type":"log","params":{"message":"step `+id+`"}}`)
		edges = append(edges, edge(prev, id))
		prev = id
	}
	return def(blocks, strings.Join(edges, ","))
}
