package service_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Input at and past the limits, through the real composition: nothing a client sends makes a
// 5xx, and no answer is many times the size of its request.
func TestLimits(t *testing.T) {
	t.Parallel()
	sys := start(t)

	// H2: jsonb stores numbers as numeric, which holds at most 16383 digits after the decimal
	// point (1e-20000 has 20000). Such numbers were a 500 from the INSERT or UPDATE. Non-zero
	// ones are past what a 64-bit float holds, so the JSON boundary (issue 12) refuses the
	// whole request with a pointer; zeros written with that many digits pass it, and are the
	// op's invalid_param.
	t.Run("NumbersPostgresCannotStore", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		zeros := "0." + strings.Repeat("0", 20000)
		for i, value := range []string{"1e-20000", zeros + "1", "[1, 1e-16384]", "1e-16383"} {
			r := b.do(t, "POST", "/api/workflows", fmt.Sprintf(`{"name":"refused-%d","definition":{"blocks":[
			 {"block_id":"t","type":"transform","params":{"value":%s}}]}}`, i, value))
			require.Equal(t, http.StatusBadRequest, r.Status, r.Raw[:min(len(r.Raw), 300)])
			require.Equal(t, "invalid_body", r.Body["error"])
			require.Contains(t, r.Body["message"], "would become 0")
			require.Equal(t, "/definition/blocks/0/params/value", r.Body["issues"].([]any)[0].(map[string]any)["path"].(string)[:33])
		}
		for i, value := range []string{zeros, "0e-20000"} {
			r := b.do(t, "POST", "/api/workflows", fmt.Sprintf(`{"name":"numbers-%d","definition":{"blocks":[
			 {"block_id":"t","type":"transform","params":{"value":%s}},{"block_id":"l","type":"log","params":{"message":"m"}}],
			 "edges":[{"block_id":"t","target_block_id":"l"}]}}`, i, value))
			require.Equal(t, http.StatusCreated, r.Status, r.Raw[:min(len(r.Raw), 300)])
			items := skipped(t, response{Status: http.StatusOK, Body: r.Body, Raw: r.Raw})
			require.Len(t, items, 2)
			require.Equal(t, "invalid_param", items[0]["reason_code"])
			require.Equal(t, "/params/value", items[0]["hint"].(map[string]any)["pointer"].(string)[:13])
			require.Equal(t, "invalid_edge_source", items[1]["reason_code"])

			id := r.Body["id"].(string)
			r = b.ops(t, id, fmt.Sprintf(`[{"operation_type":"add","block_id":"t","type":"transform","params":{"value":%s}},
			 {"operation_type":"update","block_id":"l","params":{"message":"n","x":1}},
			 {"operation_type":"add","block_id":"u","type":"transform","params":{"value":{"ok":1e-300,"big":1.5e308}}}]`, value))
			items = skipped(t, r)
			require.Len(t, items, 2, r.Raw[:min(len(r.Raw), 300)])
			require.Equal(t, "invalid_param", items[0]["reason_code"])
			require.Equal(t, "unknown_param", items[1]["reason_code"])
			require.Equal(t, 2, version(t, r), "the storable numbers were stored")
			r = b.do(t, "GET", "/api/workflows/"+id, nil)
			require.Equal(t, http.StatusOK, r.Status)
		}
	})

	// M1: a workflow has at most 2,000 blocks; the add past them says so.
	t.Run("WorkflowTooLarge", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "full", nil)
		for batch := range 4 {
			ops := make([]string, 500)
			for k := range ops {
				ops[k] = fmt.Sprintf(`{"operation_type":"add","block_id":"b%d","type":"log","params":{"message":"m"}}`, batch*500+k)
			}
			require.Empty(t, skipped(t, b.ops(t, id, "["+strings.Join(ops, ",")+"]")))
		}
		items := skipped(t, b.ops(t, id, `[{"operation_type":"add","block_id":"one_more","type":"log","params":{"message":"m"}}]`))
		require.Len(t, items, 1)
		require.Equal(t, "workflow_too_large", items[0]["reason_code"])
		require.Contains(t, items[0]["reason"], "2000 blocks")
	})

	// H1: 500 connects naming missing 64-character ids in a 1,000-block workflow answered
	// 2 MB (the existing blocks listed in each of the 500 reasons) after 8 to 11 seconds under
	// the workflow's row lock.
	t.Run("MissingBlockIDsAnswerSmall", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "missing", nil)
		long := func(prefix string, k int) string { return fmt.Sprintf("%s%0*d", prefix, 64-len(prefix), k) }
		for start := 0; start < 1000; start += 500 {
			ops := make([]string, 500)
			for k := range ops {
				ops[k] = fmt.Sprintf(`{"operation_type":"add","block_id":%q,"type":"log","params":{"message":"m"}}`, long("block", start+k))
			}
			require.Empty(t, skipped(t, b.ops(t, id, "["+strings.Join(ops, ",")+"]")))
		}
		connects := make([]string, 500)
		for k := range connects {
			connects[k] = fmt.Sprintf(`{"operation_type":"connect","block_id":%q,"target_block_id":%q}`, long("ghost", k), long("block", 0))
		}
		batch := "[" + strings.Join(connects, ",") + "]"
		r := b.ops(t, id, batch)
		items := skipped(t, r)
		require.Len(t, items, 500)
		require.Less(t, len(r.Raw), 6*len(batch), "request %d bytes, answer %d", len(batch), len(r.Raw))
		require.Contains(t, items[0]["reason"], "Existing blocks: ")
		require.Contains(t, items[499]["reason"], "skipped_items[0] lists the existing blocks")
		require.Equal(t, long("block", 499), items[499]["hint"].(map[string]any)["did_you_mean"], "ghost…499 is one word from block…499")
	})
}
