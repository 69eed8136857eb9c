package service_test

import (
	"fmt"
	"math/rand/v2"
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

// The reviewer's H1 repro: a 1,000-block workflow whose ids are 64 characters, then one
// request of 500 connect operations whose sources do not exist (about 70 KB), and, while it
// runs, a one-operation patch of the same workflow. Reports the batch's latency, its
// response size and how long the one-operation patch took.
func BenchmarkPatchMissingBlockIDs(b *testing.B) {
	sys := start(b)
	t := b
	bundle := sys.setup(t)
	id := bundle.create(t, "missing-ids", nil)
	rnd := rand.New(rand.NewPCG(1, 2))
	longID := func() string {
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		s := make([]byte, 64)
		for i := range s {
			s[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(s)
	}
	ids := make([]string, 1000)
	var adds []string
	for k := range ids {
		ids[k] = longID()
		adds = append(adds, fmt.Sprintf(`{"operation_type":"add","block_id":%q,"type":"log","params":{"message":"m"}}`, ids[k]))
	}
	for start := 0; start < len(adds); start += 500 {
		r := bundle.ops(t, id, "["+strings.Join(adds[start:start+500], ",")+"]")
		require.Equal(t, true, r.Body["ok"], r.Raw)
	}
	connects := make([]string, 500)
	for k := range connects {
		connects[k] = fmt.Sprintf(`{"operation_type":"connect","block_id":%q,"target_block_id":"b%d"}`, longID(), k)
	}
	batch := "[" + strings.Join(connects, ",") + "]"
	lat := make([]time.Duration, 0, b.N)
	var size int
	var waited time.Duration
	b.ResetTimer()
	for range b.N {
		done := make(chan time.Duration, 1)
		go func() {
			time.Sleep(50 * time.Millisecond) // let the batch take the row lock first
			start := time.Now()
			r := bundle.ops(t, id, fmt.Sprintf(`[{"operation_type":"update","block_id":%q,"params":{"message":"n"}}]`, ids[0]))
			if r.Status != http.StatusOK {
				b.Errorf("one-op patch: %d %s", r.Status, r.Raw)
			}
			done <- time.Since(start)
		}()
		start := time.Now()
		r := bundle.ops(t, id, batch)
		lat = append(lat, time.Since(start))
		require.Equal(t, http.StatusOK, r.Status)
		require.Len(t, r.Body["skipped_items"], 500)
		size = len(r.Raw)
		waited = <-done
	}
	report(b, lat)
	b.ReportMetric(float64(len(batch))/1024, "request-KB")
	b.ReportMetric(float64(size)/1024, "response-KB")
	b.ReportMetric(float64(waited.Microseconds())/1000, "one-op-ms")
}
