package catalog

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/domain/repair"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// H1: the work spent on guesses in one batch does not depend on how many operations miss:
// each missing id is guessed once, and the whole batch stays within the budget. The count is
// of dynamic-programming cells, so the bound holds on any machine. Before: 500 skips × 2
// guesses × 1,000 candidates × 64×64 cells = 4.1 billion.
func TestSuggestionWorkIsBounded(t *testing.T) {
	t.Parallel()
	c, err := New(connectors.MustLoad())
	require.NoError(t, err)
	rnd := rand.New(rand.NewPCG(1, 1))
	longID := func() string {
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, 64)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	def := workflow.Definition{}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = longID()
		def.Blocks = append(def.Blocks, workflow.Block{ID: ids[i], Type: "log", Params: map[string]any{"message": "m"}})
	}
	connects := func(missing func(i int) string) []workflow.Op {
		ops := make([]workflow.Op, 500)
		for i := range ops {
			ops[i] = workflow.Op{Type: "connect", BlockID: missing(i), TargetBlockID: ids[0]}
		}
		return ops
	}

	same := longID()
	out, b := c.apply(def, connects(func(int) string { return same }))
	require.Len(t, out.Skipped, 500)
	once := repair.NewSuggester()
	once.Closest(same, ids)
	require.Equal(t, once.Cells(), b.sug.Cells(), "the same missing id is guessed once per batch")

	distinct := make([]string, 500)
	for i := range distinct {
		distinct[i] = longID()
	}
	out, b = c.apply(def, connects(func(i int) string { return distinct[i] }))
	require.Len(t, out.Skipped, 500)
	t.Logf("500 distinct missing ids: %d cells", b.sug.Cells())
	require.LessOrEqual(t, b.sug.Cells(), repair.SuggestBudget+repair.MaxCompared*(2*repair.MaxCompared+1), "before: 4.1 billion cells")
}
