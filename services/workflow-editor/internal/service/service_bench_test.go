package service_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Latency of the patch endpoint through the real composition (HTTP, signed identity, Postgres),
// without the gateway: go test -run '^$' -bench . ./internal/service/. Reports p50 and p99.

func report(b *testing.B, lat []time.Duration) {
	b.Helper()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// A batch of 100 operations (50 adds with params, 49 connects, 1 update) that builds a new
// workflow's graph.
func BenchmarkPatch100Ops(b *testing.B) {
	sys := start(b)
	t := b
	bundle := sys.setup(t)
	var id string
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		{
			b.StopTimer()
			id = bundle.create(t, fmt.Sprintf("bench-%d", i), nil)
			b.StartTimer()
		}
		ops := make([]string, 0, 100)
		for k := range 50 {
			ops = append(ops, fmt.Sprintf(`{"operation_type":"add","block_id":"b%d_%d","type":"http.request","params":{"method":"POST","url":"https://example.com/{{ input.k }}","body":{"n":%d}}}`, i, k, k))
		}
		for k := 1; k < 50; k++ {
			ops = append(ops, fmt.Sprintf(`{"operation_type":"connect","block_id":"b%d_%d","target_block_id":"b%d_%d"}`, i, k-1, i, k))
		}
		ops = append(ops, fmt.Sprintf(`{"operation_type":"update","block_id":"b%d_0","params":{"timeout_ms":1000}}`, i))
		start := time.Now()
		r := bundle.ops(t, id, "["+strings.Join(ops, ",")+"]")
		lat = append(lat, time.Since(start))
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, true, r.Body["ok"], r.Raw)
	}
	report(b, lat)
}

// One update of a 1,000-block workflow whose every block reads its predecessor's output.
func BenchmarkPatch1000BlockWorkflow(b *testing.B) {
	sys := start(b)
	t := b
	bundle := sys.setup(t)
	id := bundle.create(t, "big", nil)
	var ops []string
	ops = append(ops, `{"operation_type":"add","block_id":"b0","type":"trigger.manual"}`)
	for k := 1; k < 1000; k++ {
		ops = append(ops, fmt.Sprintf(`{"operation_type":"add","block_id":"b%d","type":"log","params":{"message":"{{ steps.b%d.output }}"}}`, k, k-1))
	}
	for k := 1; k < 1000; k++ {
		ops = append(ops, fmt.Sprintf(`{"operation_type":"connect","block_id":"b%d","target_block_id":"b%d"}`, k-1, k))
	}
	for start := 0; start < len(ops); start += 500 {
		r := bundle.ops(t, id, "["+strings.Join(ops[start:min(start+500, len(ops))], ",")+"]")
		require.Equal(t, true, r.Body["ok"], r.Raw)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		r := bundle.ops(t, id, fmt.Sprintf(`[{"operation_type":"update","block_id":"b%d","params":{"message":"{{ steps.b%d.output }} %d"}}]`, 1+i%999, i%999, i))
		lat = append(lat, time.Since(start))
		require.Equal(t, true, r.Body["ok"], r.Raw)
		require.Empty(t, r.Body["validation_errors"])
	}
	report(b, lat)
}
