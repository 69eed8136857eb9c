package catalog_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// longIDs returns n distinct random block ids of 64 characters, the longest allowed: the worst
// case for guessing which one a model meant.
func longIDs(seed uint64, n int) []string {
	rnd := rand.New(rand.NewPCG(seed, seed))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	ids := make([]string, n)
	for i := range ids {
		b := make([]byte, 64)
		for j := range b {
			b[j] = alphabet[rnd.IntN(len(alphabet))]
		}
		ids[i] = string(b)
	}
	return ids
}

// logBlocks is a definition of one log block per id, unconnected.
func logBlocks(ids []string) workflow.Definition {
	def := workflow.Definition{Blocks: make([]workflow.Block, len(ids))}
	for i, id := range ids {
		def.Blocks[i] = workflow.Block{ID: id, Type: "log", Params: map[string]any{"message": "m"}}
	}
	return def
}

// missingConnects is the H1 repro's batch: 500 connects whose sources do not exist.
func missingConnects(missing []string, target string) []workflow.Op {
	out := make([]workflow.Op, len(missing))
	for i, id := range missing {
		out[i] = workflow.Op{Type: "connect", BlockID: id, TargetBlockID: target}
	}
	return out
}

// skipsSize is what the skipped operations weigh in a response.
func skipsSize(t testing.TB, skips []workflow.Skip) int {
	t.Helper()
	raw, err := json.Marshal(skips)
	require.NoError(t, err)
	return len(raw)
}

// H1: 500 connects naming missing 64-character ids in a 1,000-block workflow answered 2 MB,
// the existing blocks listed again in every reason. Now the first skip lists them and the
// others point at it; each still says what is wrong with its own operation.
func TestSkipsOfMissingBlocksStaySmall(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	ids := longIDs(1, 1000)
	def := logBlocks(ids)
	for _, tc := range []struct {
		name    string
		missing []string
	}{
		{"Distinct", longIDs(2, 500)},
		{"Same", strings.Split(strings.Repeat(longIDs(3, 1)[0]+",", 500), ",")[:500]},
		{"Typos", func() []string {
			out := make([]string, 500)
			for i := range out {
				out[i] = ids[i][:63] + "_" // one edit away from an existing id
			}
			return out
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := c.Apply(def, missingConnects(tc.missing, ids[0]))
			require.Len(t, out.Skipped, 500)
			// Each reason is about 500 bytes (two quoted 64-character ids and the explanation);
			// the list of existing blocks (50 of them, 3.3 KB) comes once.
			require.Less(t, skipsSize(t, out.Skipped), 400_000, "before: 2 MB")
			first := out.Skipped[0]
			require.Contains(t, first.Reason, "Existing blocks: ")
			for _, s := range out.Skipped[1:] {
				require.Equal(t, workflow.ReasonInvalidEdgeSource, s.ReasonCode)
				require.Contains(t, s.Reason, "never existed")
				require.Contains(t, s.Reason, "skipped_items[0] lists the existing blocks")
				require.NotContains(t, s.Reason, "Existing blocks: ")
			}
			if tc.name == "Typos" {
				for i, s := range out.Skipped[:20] {
					require.Equal(t, ids[i], s.Hint.DidYouMean, "a near miss is still guessed")
				}
			}
		})
	}
}

// A change to the blocks makes the next skip list them again: the earlier list is stale.
func TestSkipsListTheBlocksAgainAfterAChange(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	out := c.Apply(workflow.Definition{}, ops(t, `[
	 {"operation_type":"add","block_id":"a","type":"trigger.manual"},
	 {"operation_type":"connect","block_id":"x","target_block_id":"a"},
	 {"operation_type":"remove","block_id":"y"},
	 {"operation_type":"add","block_id":"b","type":"log","params":{"message":"m"}},
	 {"operation_type":"update","block_id":"z","params":{}}
	]`))
	require.Len(t, out.Skipped, 3)
	require.Contains(t, out.Skipped[0].Reason, `Existing blocks: "a".`)
	require.Equal(t, []string{"a"}, out.Skipped[0].Hint.Allowed)
	require.Contains(t, out.Skipped[1].Reason, "skipped_items[0] lists the existing blocks")
	require.Empty(t, out.Skipped[1].Hint.Allowed)
	require.Contains(t, out.Skipped[2].Reason, `Existing blocks: "a", "b".`)
}

// M1: a workflow has at most 2,000 blocks and 4,000 edges; an add or a connect past them is
// skipped with workflow_too_large, and so are params that would make it too big to store.
func TestWorkflowLimits(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	ids := make([]string, workflow.MaxBlocks)
	for i := range ids {
		ids[i] = fmt.Sprintf("b%d", i)
	}
	full := logBlocks(ids)

	t.Run("Blocks", func(t *testing.T) {
		t.Parallel()
		out := c.Apply(full, ops(t, `[{"operation_type":"add","block_id":"one_more","type":"log","params":{"message":"m"}},
		 {"operation_type":"remove","block_id":"b0"},
		 {"operation_type":"add","block_id":"one_more","type":"log","params":{"message":"m"}}]`))
		require.Len(t, out.Skipped, 1)
		require.Equal(t, workflow.ReasonWorkflowTooLarge, out.Skipped[0].ReasonCode)
		require.Contains(t, out.Skipped[0].Reason, "2000 blocks")
		require.Equal(t, 2, out.Applied, "a remove makes room")
		require.Len(t, out.Definition.Blocks, workflow.MaxBlocks)
	})

	t.Run("Edges", func(t *testing.T) {
		t.Parallel()
		var connects []workflow.Op
		for step := 1; len(connects) < workflow.MaxEdges+1; step++ {
			for i := 0; i+step < len(ids) && len(connects) < workflow.MaxEdges+1; i++ {
				connects = append(connects, workflow.Op{Type: "connect", BlockID: ids[i], TargetBlockID: ids[i+step]})
			}
		}
		out := c.Apply(full, connects)
		require.Equal(t, workflow.MaxEdges, out.Applied)
		require.Len(t, out.Skipped, 1)
		require.Equal(t, workflow.ReasonWorkflowTooLarge, out.Skipped[0].ReasonCode)
		require.Contains(t, out.Skipped[0].Reason, "4000 edges")
	})

	t.Run("Bytes", func(t *testing.T) {
		t.Parallel()
		chunk := strings.Repeat("x", 3<<20)
		add := func(id string) workflow.Op {
			return workflow.Op{Type: "add", BlockID: id, BlockType: "transform", Params: map[string]any{"value": chunk}, HasParams: true}
		}
		out := c.Apply(workflow.Definition{}, []workflow.Op{add("a"), add("b"), add("c"),
			{Type: "update", BlockID: "b", Params: map[string]any{"value": "small"}, HasParams: true}, add("c")})
		require.Len(t, out.Skipped, 1)
		s := out.Skipped[0]
		require.Equal(t, 2, s.OperationIndex)
		require.Equal(t, workflow.ReasonWorkflowTooLarge, s.ReasonCode)
		require.Contains(t, s.Reason, "8 MiB")
		require.Equal(t, 4, out.Applied, "an update that shrinks a block makes room")
		raw, err := json.Marshal(out.Definition)
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw), workflow.MaxDefinitionBytes)

		grown := c.Apply(out.Definition, []workflow.Op{{Type: "update", BlockID: "b", Params: map[string]any{"value": chunk}, HasParams: true}})
		require.Len(t, grown.Skipped, 1)
		require.Equal(t, workflow.ReasonWorkflowTooLarge, grown.Skipped[0].ReasonCode, "an update counts too")

		// A remove frees its block's bytes; the sizes of the blocks after it stay theirs.
		swapped := c.Apply(out.Definition, []workflow.Op{{Type: "remove", BlockID: "a"},
			{Type: "update", BlockID: "b", Params: map[string]any{"value": chunk}, HasParams: true}, add("d")})
		require.Len(t, swapped.Skipped, 1)
		require.Equal(t, 2, swapped.Skipped[0].OperationIndex)
		require.Equal(t, workflow.ReasonWorkflowTooLarge, swapped.Skipped[0].ReasonCode)
	})
}

// The path an edge_creates_cycle reason shows is cut in a long chain: the reason stays short.
func TestCyclePathIsShort(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	ids := longIDs(4, 300)
	def := logBlocks(ids)
	for i := 1; i < len(ids); i++ {
		def.Edges = append(def.Edges, workflow.Edge{From: ids[i-1], To: ids[i]})
	}
	out := c.Apply(def, []workflow.Op{{Type: "connect", BlockID: ids[len(ids)-1], TargetBlockID: ids[0]}})
	require.Len(t, out.Skipped, 1)
	s := out.Skipped[0]
	require.Equal(t, workflow.ReasonEdgeCreatesCycle, s.ReasonCode)
	require.Contains(t, s.Reason, "… 292 more …")
	require.Less(t, len(s.Reason), 1500, "before: 20 KB, the whole path")
}

// A workflow lists at most MaxValidationErrors validation errors; the last says how many more.
func TestValidationErrorsAreCapped(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	ids := longIDs(5, 300)
	def := logBlocks(ids)
	def.Blocks = append(def.Blocks, workflow.Block{ID: "t", Type: "trigger.manual", Params: map[string]any{}})
	for _, blk := range def.Blocks[:len(ids)] {
		blk.Params["message"] = "{{ steps.nope.output }}" // unreachable and a bad reference each
	}
	errs := c.Validate(def)
	require.Len(t, errs, workflow.MaxValidationErrors)
	require.Contains(t, errs[len(errs)-1].Message, "(400 more validation errors are not listed")
}

// M1: validation memory grows with the graph, not with its square: the ancestors of a block
// are found by walking up from it, not kept as a bitset per block (n²/8 bytes: 30,000 blocks
// took 132 MB). Doubling the blocks doubles what a validation allocates (before: 13 MB, then
// 42 MB). Not parallel: it reads the process's allocation counter.
func TestValidateMemoryIsLinear(t *testing.T) { //nolint:paralleltest // measures allocations
	c := catalog(t)
	allocated := func(n int) uint64 {
		// A chain whose every block reads the one before it, and every 1,000th the trigger;
		// fewer distinct expressions than the parse cache holds, so parsing is not measured.
		def := workflow.Definition{Blocks: make([]workflow.Block, n), Edges: make([]workflow.Edge, 0, n)}
		def.Blocks[0] = workflow.Block{ID: "b0", Type: "trigger.manual", Params: map[string]any{}}
		for i := 1; i < n; i++ {
			msg := fmt.Sprintf("{{ steps.b%d.output }}", i-1)
			if i%1000 == 0 {
				msg = "{{ steps.b0.output }}"
			}
			def.Blocks[i] = workflow.Block{ID: fmt.Sprintf("b%d", i), Type: "log", Params: map[string]any{"message": msg}}
			def.Edges = append(def.Edges, workflow.Edge{From: fmt.Sprintf("b%d", i-1), To: fmt.Sprintf("b%d", i)})
		}
		require.Empty(t, c.Validate(def)) // warms the parse cache
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		require.Empty(t, c.Validate(def))
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(8000), allocated(16000)
	t.Logf("validation allocated %.1f MB for 8,000 blocks, %.1f MB for 16,000", float64(small)/(1<<20), float64(large)/(1<<20))
	require.Less(t, float64(large), 2.5*float64(small), "twice the blocks, about twice the memory")
	require.Less(t, large, uint64(20<<20))
}

// BenchmarkApplyMissingBlockIDs is the H1 repro in the domain: 500 connects naming missing
// 64-character ids, against 1,000 blocks of 64-character ids.
func BenchmarkApplyMissingBlockIDs(b *testing.B) {
	c := catalog(b)
	def := logBlocks(longIDs(1, 1000))
	batch := missingConnects(longIDs(2, 500), def.Blocks[0].ID)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out := c.Apply(def, batch)
		size = skipsSize(b, out.Skipped)
	}
	b.ReportMetric(float64(size)/1024, "skips-KB")
}
