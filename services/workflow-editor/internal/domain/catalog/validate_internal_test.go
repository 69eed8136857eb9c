package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// M2: a version is validated once; reading it again parses nothing, even for an expression
// longer than the old 2 KB cache limit.
func TestValidationIsRememberedByVersion(t *testing.T) {
	t.Parallel()
	c, err := New(connectors.MustLoad())
	require.NoError(t, err)
	expr := "input.s == '" + strings.Repeat("x", 3000) + "'"
	def := workflow.Definition{
		Blocks: []workflow.Block{
			{ID: "t", Type: "trigger.manual", Params: map[string]any{}},
			{ID: "c", Type: "condition", Params: map[string]any{"expression": expr}},
			{ID: "l", Type: "log", Params: map[string]any{"message": "{{ steps.nope.output }}"}},
		},
		Edges: []workflow.Edge{{From: "t", To: "c"}, {From: "c", To: "l", Branch: "true"}},
	}
	at := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	w := workflow.UnmarshalFromDatabase("wf_1", "org_1", "w", "", 3, def, at, at)
	first := c.Check(w)
	require.Len(t, first.ValidationErrors, 1)
	parses := c.exprs.parses
	for range 5 {
		again := c.Check(w)
		require.Equal(t, first.ValidationErrors, again.ValidationErrors)
	}
	require.Equal(t, parses, c.exprs.parses, "reads of the same version parse nothing")

	next := workflow.UnmarshalFromDatabase("wf_1", "org_1", "w", "", 4, def, at, at)
	require.Equal(t, first.ValidationErrors, c.Check(next).ValidationErrors)
	require.Equal(t, parses, c.exprs.parses, "a new version with the same expressions parses none again")
	require.Len(t, c.checks.entries, 2)
}
