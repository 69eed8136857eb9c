package workflow_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// opsFromBytes turns fuzz input into a sequence of operations over a small alphabet of ids,
// types and params, so that the fuzzer reaches every branch of the applier quickly.
func opsFromBytes(data []byte) []workflow.Op {
	ids := []string{"a", "b", "c", "d", "e", "", "bad id", "a-1"}
	types := []string{"trigger.manual", "http.request", "condition", "log", "wait", "transform", "nope", ""}
	opTypes := []string{"add", "update", "remove", "connect", "disconnect", "add", "connect", "zap"}
	params := []map[string]any{
		nil,
		{"message": "hi {{ steps.a.output }}"},
		{"method": "GET", "url": "https://x"},
		{"expression": "input.n > 1"},
		{"duration": "1s"},
		{"allow_private_network": true},
		{"url": nil},
		{"value": []any{"{{ input }}", json.Number("1")}},
	}
	branches := []*string{nil, ptr("true"), ptr("false"), ptr("maybe")}
	var out []workflow.Op
	for len(data) >= 4 {
		b0, b1, b2, b3 := data[0], data[1], data[2], data[3]
		data = data[4:]
		op := workflow.Op{
			Type:          opTypes[b0%8],
			BlockID:       ids[b1%8],
			BlockType:     types[b2%8],
			TargetBlockID: ids[(b1>>3)%8],
			Branch:        branches[(b2>>3)%4],
		}
		if p := params[b3%8]; p != nil {
			op.Params, op.HasParams = p, true
		}
		out = append(out, op)
	}
	return out
}

func ptr(s string) *string { return &s }

// Any sequence of operations leaves a sound definition: it round-trips through JSON, every edge
// joins existing blocks, ids are unique, there is no cycle, and validation does not panic.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 1, 3, 1, 3, 8, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 9, 1, 2, 3, 8, 0, 0, 3, 1, 0, 0, 2, 0, 0, 0, 4, 8, 0, 0})
	f.Add([]byte{5, 0, 0, 0, 6, 1, 2, 3, 7, 7, 7, 7, 1, 0, 0, 5})
	c := catalog(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		half := len(data) / 2
		first := c.Apply(workflow.Definition{}, opsFromBytes(data[:half]))
		out := c.Apply(first.Definition, opsFromBytes(data[half:]))
		require.Equal(t, len(opsFromBytes(data[half:])), out.Applied+len(out.Skipped))
		requireSound(t, out.Definition)
		_ = c.Validate(out.Definition)

		raw, err := json.Marshal(out.Definition)
		require.NoError(t, err)
		back, err := workflow.ParseDefinition(raw)
		require.NoError(t, err)
		again, err := json.Marshal(back)
		require.NoError(t, err)
		require.JSONEq(t, string(raw), string(again))
		require.Equal(t, len(out.Definition.Blocks), len(back.Blocks))
		require.Equal(t, normalizeEdges(out.Definition.Edges), normalizeEdges(back.Edges))
	})
}

func normalizeEdges(e []workflow.Edge) []workflow.Edge {
	if len(e) == 0 {
		return nil
	}
	return e
}

func requireSound(t *testing.T, d workflow.Definition) {
	t.Helper()
	ids := map[string]bool{}
	for _, b := range d.Blocks {
		require.False(t, ids[b.ID], "duplicate block id %q", b.ID)
		ids[b.ID] = true
	}
	out := map[string][]string{}
	seen := map[[2]string]bool{}
	for _, e := range d.Edges {
		require.True(t, ids[e.From], "dangling edge source %q", e.From)
		require.True(t, ids[e.To], "dangling edge target %q", e.To)
		require.NotEqual(t, e.From, e.To)
		require.False(t, seen[[2]string{e.From, e.To}], "duplicate edge")
		seen[[2]string{e.From, e.To}] = true
		out[e.From] = append(out[e.From], e.To)
	}
	// No cycle: a DFS never meets a block on its own stack.
	state := map[string]int{}
	var visit func(string)
	visit = func(n string) {
		require.NotEqual(t, 1, state[n], "cycle through %q", n)
		if state[n] == 2 {
			return
		}
		state[n] = 1
		for _, m := range out[n] {
			visit(m)
		}
		state[n] = 2
	}
	for id := range ids {
		visit(id)
	}
}

// Any string in a templated or expression param is checked without a panic, and a problem is
// always reported against the block that holds it.
func FuzzTemplates(f *testing.F) {
	for _, s := range []string{"{{ steps.a.output.x }}", "{{ input. }}", "{{", "}}{{}}", "let x = 1; x + y", "all(input.l, {# > 0})", "steps[\"a\"].output"} {
		f.Add(s)
	}
	c := catalog(f)
	f.Fuzz(func(t *testing.T, s string) {
		def := workflow.Definition{
			Blocks: []workflow.Block{
				{ID: "a", Type: "trigger.manual", Params: map[string]any{}},
				{ID: "l", Type: "log", Params: map[string]any{"message": s}},
				{ID: "c", Type: "condition", Params: map[string]any{"expression": s}},
			},
			Edges: []workflow.Edge{{From: "a", To: "l"}, {From: "l", To: "c"}},
		}
		for _, e := range c.Validate(def) {
			require.Contains(t, []string{"l", "c"}, e.BlockID, e.Message)
		}
	})
}
