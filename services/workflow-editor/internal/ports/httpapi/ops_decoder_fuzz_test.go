package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/proto/errs"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// Any body either decodes into at most MaxOps operations or is one invalid_body error with
// issues; and whatever operations it decodes into, applying them to an empty workflow (twice,
// the second batch on the first's result) leaves a definition that round-trips through JSON
// and has no dangling edge.
func FuzzDecodeOps(f *testing.F) {
	for _, s := range []string{
		`{"ops":[]}`,
		`{"ops":[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"b","type":"log","params":{"message":"{{ steps.a.output }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"b"}]}`,
		`{"ops":[{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"input.n > 1"}},{"operation_type":"connect","block_id":"c","target_block_id":"c","branch":"true"}]}`,
		`{"ops":[{"operation_type":"update","block_id":"a","params":{"x":null,"n":1e400}},{"operation_type":"remove","block_id":"a"},{"operation_type":"disconnect","block_id":"a","target_block_id":"b"}]}`,
		`{"ops":[{"target":"b"}]}`,
		`{"ops":[3,"x",null,[]]}`,
		`{"ops":{}}`,
		`[]`,
		`{"ops":[{"operation_type":"add","block_id":"a","type":"http.request","params":{"method":"GET","url":"http://\u0000"}}]}`,
		// Numbers Postgres's numeric cannot hold, and ones at its limits.
		`{"ops":[{"operation_type":"add","block_id":"t","type":"transform","params":{"value":1e-20000}}]}`,
		`{"ops":[{"operation_type":"add","block_id":"t","type":"transform","params":{"value":[0.` + strings.Repeat("0", 20000) + `]}}]}`,
		`{"ops":[{"operation_type":"add","block_id":"t","type":"transform","params":{"value":{"a":1e-16383,"b":0e-16383,"c":-0,"d":1.5e308}}}]}`,
		`{"ops":[{"operation_type":"add","block_id":"w","type":"wait","params":{"duration":"9999999999h"}},{"operation_type":"add","block_id":"f","type":"fail","params":{"message":"m","fail_attempts":1e300}}]}`,
		`{"ops":[{"operation_type":"add","block_id":"t","type":"trigger.manual","params":{"input_schema":{"$ref":"#/nope"}}}]}`,
		`{"ops":[{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"` + strings.Repeat("(", 200) + `1` + strings.Repeat(")", 200) + `"}}]}`,
	} {
		f.Add([]byte(s))
	}
	cat, err := catalog.New(connectors.MustLoad())
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ops, err := decodeOps(raw)
		if err != nil {
			e := errs.From(err)
			require.Contains(t, []errs.Code{errs.InvalidBody}, e.Code, err.Error())
			require.NotEmpty(t, e.Fields["issues"])
			return
		}
		require.LessOrEqual(t, len(ops), MaxOps)
		w, err := workflow.New("wf_x", "org_x", "fuzz", "", time.Unix(0, 0))
		require.NoError(t, err)
		first := w.Edit(cat, ops, time.Unix(1, 0))
		second := w.Edit(cat, ops, time.Unix(2, 0))
		require.Equal(t, len(ops), first.Applied+len(first.Skipped))
		require.Equal(t, len(ops), second.Applied+len(second.Skipped))

		def := w.Definition()
		rawDef, err := json.Marshal(def)
		require.NoError(t, err)
		back, err := workflow.ParseDefinition(rawDef)
		require.NoError(t, err)
		again, err := json.Marshal(back)
		require.NoError(t, err)
		require.JSONEq(t, string(rawDef), string(again))
		ids := map[string]bool{}
		for _, b := range def.Blocks {
			require.False(t, ids[b.ID])
			ids[b.ID] = true
		}
		for _, e := range def.Edges {
			require.True(t, ids[e.From] && ids[e.To], "dangling edge %v", e)
		}
		_ = cat.Validate(def)
	})
}
