package catalog_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
	"svc.dev/services/workflow-editor/internal/domain/workflow/workflowtest"
)

// Any sequence of operations leaves a sound definition: it round-trips through JSON, every edge
// joins existing blocks, ids are unique, there is no cycle, and validation does not panic.
func FuzzApply(f *testing.F) {
	// The seeds, and the params the operations draw from, include values at and past what can
	// be stored; the repository contract stores every one the applier accepts
	// (workflowtest.RunRepositoryContract, StoresWhatApplyAccepts).
	for _, seed := range workflowtest.ApplySeeds() {
		f.Add(seed)
	}
	c := catalog(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		half := len(data) / 2
		first := c.Apply(workflow.Definition{}, workflowtest.OpsFromBytes(data[:half]))
		out := c.Apply(first.Definition, workflowtest.OpsFromBytes(data[half:]))
		require.Equal(t, len(workflowtest.OpsFromBytes(data[half:])), out.Applied+len(out.Skipped))
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
