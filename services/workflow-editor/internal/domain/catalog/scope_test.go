package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// TestConcurrencyKeyScope: a trigger's concurrency key is evaluated at the run's start, over
// the input only; a key that names steps, run or workflow is skipped at edit time with the
// allowed roots (and the input path meant, for a step's output) as its hint.
func TestConcurrencyKeyScope(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, base))
	require.Empty(t, seed.Skipped)

	for _, tc := range []struct {
		name, op, pointer, dym string
		inText                 []string
	}{
		{"StepOutput", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":2,"key":"{{ steps.fetch.output.customer }}"}}}`,
			"/params/concurrency/key", "{{ input.customer }}", []string{"steps.", "before any step ran", "rule: x-template-scope", `Allowed: "input"`}},
		{"StepOnAdd", `{"operation_type":"add","block_id":"t2","type":"trigger.webhook","params":{"concurrency":{"limit":1,"key":"c-{{ steps.x.output.id }}"}}}`,
			"/params/concurrency/key", "c-{{ input.id }}", nil},
		{"RunID", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":2,"key":"{{ run.id }}"}}}`,
			"/params/concurrency/key", "", []string{"run."}},
		{"Unknown", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":2,"key":"{{ customer }}"}}}`,
			"/params/concurrency/key", "", []string{`"customer"`}},
		{"LimitZero", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":0}}}`,
			"/params/concurrency/limit", "", []string{"minimum"}},
		{"LimitHuge", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":1001}}}`,
			"/params/concurrency/limit", "", []string{"maximum"}},
		{"LimitMissing", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"key":"{{ input.a }}"}}}`,
			"/params/concurrency", "", []string{"limit"}},
		{"UnknownMember", `{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":1,"scope":"x"}}}`,
			"/params/concurrency/scope", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := c.Apply(seed.Definition, ops(t, "["+tc.op+"]"))
			require.Zero(t, out.Applied, "%+v", out.Skipped)
			require.Len(t, out.Skipped, 1)
			s := out.Skipped[0]
			require.Equal(t, workflow.ReasonInvalidParam, s.ReasonCode, s.Reason)
			require.Equal(t, tc.pointer, s.Hint.Pointer, s.Reason)
			require.Equal(t, tc.dym, s.Hint.DidYouMean, s.Reason)
			for _, want := range tc.inText {
				require.Contains(t, s.Reason, want)
			}
		})
	}

	t.Run("InputKeysApply", func(t *testing.T) {
		t.Parallel()
		for _, key := range []string{"{{ input.customer }}", "acme-{{ input.region }}-{{ upper(input.tier) }}", "fixed"} {
			out := c.Apply(seed.Definition, ops(t, `[{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":3,"key":"`+key+`"}}}]`))
			require.Empty(t, out.Skipped, key)
			require.Empty(t, c.Validate(out.Definition), key)
		}
		out := c.Apply(seed.Definition, ops(t, `[{"operation_type":"update","block_id":"start","params":{"concurrency":{"limit":1000}}}]`))
		require.Empty(t, out.Skipped)
	})
}
