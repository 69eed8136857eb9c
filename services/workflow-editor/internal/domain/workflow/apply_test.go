package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

func catalog(t testing.TB) *workflow.Catalog {
	t.Helper()
	c, err := workflow.NewCatalog(connectors.MustLoad())
	require.NoError(t, err)
	return c
}

// ops decodes a JSON array of operations the way the HTTP port does (numbers as json.Number).
func ops(t testing.TB, raw string) []workflow.Op {
	t.Helper()
	var in []map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&in))
	out := make([]workflow.Op, len(in))
	for i, m := range in {
		op := workflow.Op{}
		op.Type, _ = m["operation_type"].(string)
		op.BlockID, _ = m["block_id"].(string)
		op.BlockType, _ = m["type"].(string)
		op.TargetBlockID, _ = m["target_block_id"].(string)
		if b, ok := m["branch"].(string); ok {
			op.Branch = &b
		}
		if p, ok := m["params"].(map[string]any); ok {
			op.Params, op.HasParams = p, true
		}
		out[i] = op
	}
	return out
}

const base = `[
 {"operation_type":"add","block_id":"start","type":"trigger.manual"},
 {"operation_type":"add","block_id":"fetch","type":"http.request","params":{"method":"GET","url":"https://example.com"}},
 {"operation_type":"add","block_id":"check","type":"condition","params":{"expression":"steps.fetch.output.status == 200"}},
 {"operation_type":"add","block_id":"ok","type":"log","params":{"message":"got {{ steps.fetch.output.body }}"}},
 {"operation_type":"connect","block_id":"start","target_block_id":"fetch"},
 {"operation_type":"connect","block_id":"fetch","target_block_id":"check"},
 {"operation_type":"connect","block_id":"check","target_block_id":"ok","branch":"true"}
]`

func TestApplySkips(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, base))
	require.Empty(t, seed.Skipped)
	require.Empty(t, c.Validate(seed.Definition))

	for _, tc := range []struct {
		name    string
		op      string
		code    workflow.ReasonCode
		dym     string
		pointer string
		inText  []string
	}{
		{"InvalidBlockID", `{"operation_type":"add","block_id":"my block","type":"log","params":{"message":"x"}}`, workflow.ReasonInvalidBlockID, "my_block", "/block_id", nil},
		{"DuplicateBlockID", `{"operation_type":"add","block_id":"fetch","type":"log"}`, workflow.ReasonDuplicateBlockID, "fetch_2", "/block_id", []string{"already exists"}},
		{"TypeNotRegistered", `{"operation_type":"add","block_id":"x","type":"http"}`, workflow.ReasonBlockTypeNotRegistered, "http.request", "/type", []string{`"trigger.manual"`, `"fail"`}},
		{"TypeNotRegisteredCase", `{"operation_type":"add","block_id":"x","type":"HttpRequest"}`, workflow.ReasonBlockTypeNotRegistered, "http.request", "/type", nil},
		{"Hidden", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"GET","url":"http://a","allow_private_network":true}}`, workflow.ReasonHiddenParam, "", "/params/allow_private_network", nil},
		{"HiddenOnUpdate", `{"operation_type":"update","block_id":"fetch","params":{"allow_private_network":true}}`, workflow.ReasonHiddenParam, "", "/params/allow_private_network", nil},
		{"Unknown", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"GET","uri":"http://a"}}`, workflow.ReasonUnknownParam, "url", "/params/uri", []string{`"url"`}},
		{"InvalidEnum", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"FETCH","url":"http://a"}}`, workflow.ReasonInvalidParam, "", "/params/method", []string{"/params/method", "enum", `"GET"`}},
		{"InvalidType", `{"operation_type":"update","block_id":"fetch","params":{"timeout_ms":"soon"}}`, workflow.ReasonInvalidParam, "", "/params/timeout_ms", []string{"rule: type"}},
		{"InvalidNested", `{"operation_type":"update","block_id":"fetch","params":{"headers":{"X-N":5}}}`, workflow.ReasonInvalidParam, "", "/params/headers/X-N", nil},
		{"UpdateWithoutParams", `{"operation_type":"update","block_id":"fetch"}`, workflow.ReasonInvalidParam, "", "/params", nil},
		{"WaitTwoOfOne", `{"operation_type":"add","block_id":"w","type":"wait","params":{"duration":"1s","signal":"go"}}`, workflow.ReasonInvalidParam, "", "/params/signal", []string{"exactly one"}},
		{"WaitTimeoutNeedsSignal", `{"operation_type":"add","block_id":"w","type":"wait","params":{"duration":"1s","timeout":"5m"}}`, workflow.ReasonInvalidParam, "", "/params/timeout", []string{`Param "timeout"`, "dependentRequired"}},
		{"BadTimestamp", `{"operation_type":"add","block_id":"w","type":"wait","params":{"until":"tomorrow"}}`, workflow.ReasonInvalidParam, "", "/params/until", []string{"date-time", "rule: format"}},
		{"BadInputSchema", `{"operation_type":"add","block_id":"t","type":"trigger.manual","params":{"input_schema":{"type":5}}}`, workflow.ReasonInvalidParam, "", "/params/input_schema/type", nil},
		{"UpdateMissing", `{"operation_type":"update","block_id":"fetc","params":{}}`, workflow.ReasonBlockNotFound, "fetch", "/block_id", []string{"never existed"}},
		{"RemoveMissing", `{"operation_type":"remove","block_id":"nope"}`, workflow.ReasonBlockNotFound, "", "/block_id", nil},
		{"EdgeSource", `{"operation_type":"connect","block_id":"nope","target_block_id":"ok"}`, workflow.ReasonInvalidEdgeSource, "", "/block_id", []string{"never existed"}},
		{"EdgeTarget", `{"operation_type":"connect","block_id":"ok","target_block_id":"nope"}`, workflow.ReasonInvalidEdgeTarget, "", "/target_block_id", nil},
		{"SelfLoop", `{"operation_type":"connect","block_id":"ok","target_block_id":"ok"}`, workflow.ReasonSelfLoop, "", "/target_block_id", nil},
		{"Duplicate", `{"operation_type":"connect","block_id":"start","target_block_id":"fetch"}`, workflow.ReasonDuplicateEdge, "", "/target_block_id", nil},
		{"Cycle", `{"operation_type":"connect","block_id":"ok","target_block_id":"fetch","branch":null}`, workflow.ReasonEdgeCreatesCycle, "", "/target_block_id", []string{`fetch -> check -> ok`}},
		{"BranchMissing", `{"operation_type":"connect","block_id":"check","target_block_id":"fetch"}`, workflow.ReasonInvalidBranch, "", "/branch", nil},
		{"BranchBad", `{"operation_type":"connect","block_id":"check","target_block_id":"start","branch":"yes"}`, workflow.ReasonInvalidBranch, "true", "/branch", nil},
		{"BranchOnNonCondition", `{"operation_type":"connect","block_id":"start","target_block_id":"ok","branch":"true"}`, workflow.ReasonInvalidBranch, "", "/branch", nil},
		{"EdgeNotFound", `{"operation_type":"disconnect","block_id":"start","target_block_id":"fech"}`, workflow.ReasonEdgeNotFound, "fetch", "/target_block_id", nil},
		{"UnknownOp", `{"operation_type":"addd","block_id":"x"}`, workflow.ReasonUnknownOperationType, "add", "/operation_type", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := c.Apply(seed.Definition, ops(t, "["+tc.op+"]"))
			require.Zero(t, out.Applied)
			require.Len(t, out.Skipped, 1)
			s := out.Skipped[0]
			require.Equal(t, tc.code, s.ReasonCode, s.Reason)
			require.Equal(t, tc.dym, s.Hint.DidYouMean, s.Reason)
			require.Equal(t, tc.pointer, s.Hint.Pointer, s.Reason)
			for _, want := range tc.inText {
				require.Contains(t, s.Reason, want)
			}
			require.Equal(t, seed.Definition, out.Definition, "a skipped operation changes nothing")
		})
	}
}

// A connect after a skipped add says the add was skipped; after a remove, that it was removed.
func TestEdgeSourceHistory(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	out := c.Apply(workflow.Definition{}, ops(t, `[
	 {"operation_type":"add","block_id":"a","type":"trigger.manual"},
	 {"operation_type":"add","block_id":"b","type":"nope"},
	 {"operation_type":"connect","block_id":"b","target_block_id":"a"},
	 {"operation_type":"add","block_id":"c","type":"log","params":{"message":"m"}},
	 {"operation_type":"remove","block_id":"c"},
	 {"operation_type":"connect","block_id":"c","target_block_id":"a"}
	]`))
	require.Equal(t, 3, out.Applied)
	require.Len(t, out.Skipped, 3)
	require.Equal(t, workflow.ReasonInvalidEdgeSource, out.Skipped[1].ReasonCode)
	require.Contains(t, out.Skipped[1].Reason, "operation 1 of this batch) was skipped with block_type_not_registered")
	require.Equal(t, workflow.ReasonInvalidEdgeSource, out.Skipped[2].ReasonCode)
	require.Contains(t, out.Skipped[2].Reason, "removed by operation 4")
}

func TestUpdateMergesAndNullRemoves(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, base))
	out := c.Apply(seed.Definition, ops(t, `[{"operation_type":"update","block_id":"fetch","params":{"url":null,"timeout_ms":500}}]`))
	require.Equal(t, 1, out.Applied)
	p := out.Definition.Blocks[1].Params
	require.NotContains(t, p, "url")
	require.Equal(t, json.Number("500"), p["timeout_ms"])
	require.Equal(t, "GET", p["method"])
	require.Equal(t, "https://example.com", seed.Definition.Blocks[1].Params["url"], "the input definition is untouched")

	errs := c.Validate(out.Definition)
	require.Len(t, errs, 1)
	require.Equal(t, workflow.ValidationMissingRequiredParam, errs[0].Code)
	require.Equal(t, "/params/url", errs[0].Pointer)
}

func TestRemoveTakesEdges(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, base))
	out := c.Apply(seed.Definition, ops(t, `[{"operation_type":"remove","block_id":"check"}]`))
	require.Equal(t, 1, out.Applied)
	require.Len(t, out.Definition.Blocks, 3)
	require.Equal(t, []workflow.Edge{{From: "start", To: "fetch"}}, out.Definition.Edges)
}

// A templated value is checked at run time, not against the param's schema.
func TestTemplatedParams(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	out := c.Apply(workflow.Definition{}, ops(t, `[
	 {"operation_type":"add","block_id":"a","type":"trigger.manual"},
	 {"operation_type":"add","block_id":"b","type":"http.request","params":{"method":"{{ input.method }}","url":"{{ input.url }}","timeout_ms":"{{ input.t }}"}}
	]`))
	require.Empty(t, out.Skipped)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, tc := range []struct {
		name    string
		ops     string
		code    workflow.ValidationCode
		block   string
		dym     string
		inText  []string
		pointer string
	}{
		{"NoTrigger", `[{"operation_type":"add","block_id":"l","type":"log","params":{"message":"m"}}]`, workflow.ValidationNoTrigger, "", "", []string{"trigger.manual"}, ""},
		{"MultipleTriggers", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"b","type":"trigger.webhook"}]`, workflow.ValidationMultipleTriggers, "b", "", nil, ""},
		{"TriggerIncoming", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"m"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"},{"operation_type":"add","block_id":"x","type":"log","params":{"message":"m"}},{"operation_type":"connect","block_id":"x","target_block_id":"a"}]`, workflow.ValidationTriggerHasIncomingEdge, "a", "", []string{`"x"`}, ""},
		{"Unreachable", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"m"}}]`, workflow.ValidationUnreachableBlock, "l", "", nil, ""},
		{"Missing", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log"},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationMissingRequiredParam, "l", "", []string{`"message"`}, "/params/message"},
		{"MissingOneOf", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"w","type":"wait"},{"operation_type":"connect","block_id":"a","target_block_id":"w"}]`, workflow.ValidationMissingRequiredParam, "w", "", []string{"duration", "until", "signal"}, "/params"},
		{"NotUpstream", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ steps.m.output }}"}},{"operation_type":"add","block_id":"m","type":"log","params":{"message":"x"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"},{"operation_type":"connect","block_id":"a","target_block_id":"m"}]`, workflow.ValidationUnknownReference, "l", "a", []string{"steps.m", "not upstream"}, "/params/message"},
		{"NoSuchStep", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ steps.aa.output }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "a", []string{`"aa", which does not exist`}, "/params/message"},
		{"BadRoot", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ inptu.x }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "input", []string{"inptu"}, "/params/message"},
		{"NotOutput", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ steps.a.result }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "steps.a.output", nil, "/params/message"},
		{"BadTemplate", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ input. }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationInvalidExpression, "l", "", []string{"{{ input. }}"}, "/params/message"},
		{"Unclosed", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ input.x "}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationInvalidExpression, "l", "", []string{"not closed"}, "/params/message"},
		{"BadCondition", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"input.n >"}},{"operation_type":"connect","block_id":"a","target_block_id":"c"}]`, workflow.ValidationInvalidExpression, "c", "", nil, "/params/expression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := c.Apply(workflow.Definition{}, ops(t, tc.ops))
			require.Empty(t, out.Skipped)
			var errs []workflow.ValidationError
			for _, e := range c.Validate(out.Definition) {
				// A block leading into the trigger is also unreachable; each test looks at one code.
				if e.Code == tc.code {
					errs = append(errs, e)
				}
			}
			require.Len(t, errs, 1, "%+v", errs)
			e := errs[0]
			require.Equal(t, tc.code, e.Code, e.Message)
			require.Equal(t, tc.block, e.BlockID, e.Message)
			require.Equal(t, tc.dym, e.DidYouMean, e.Message)
			require.Equal(t, tc.pointer, e.Pointer, e.Message)
			for _, want := range tc.inText {
				require.Contains(t, e.Message, want)
			}
		})
	}
}

// Expressions may use builtins, let-bound names and predicates without false references.
func TestExpressionScope(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	out := c.Apply(workflow.Definition{}, ops(t, `[
	 {"operation_type":"add","block_id":"a","type":"trigger.manual"},
	 {"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"let n = len(input.items); n > 2 && all(input.items, {# > 0}) && upper(run.id) != workflow.id && steps.a.output.x != nil"}},
	 {"operation_type":"connect","block_id":"a","target_block_id":"c"}
	]`))
	require.Empty(t, out.Skipped)
	require.Empty(t, c.Validate(out.Definition))
}

func TestDefinitionJSON(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, base))
	raw, err := json.Marshal(seed.Definition)
	require.NoError(t, err)
	require.Contains(t, string(raw), `{"block_id":"check","target_block_id":"ok","branch":"true"}`)
	back, err := workflow.ParseDefinition(raw)
	require.NoError(t, err)
	require.Equal(t, seed.Definition, back)
	empty, err := json.Marshal(workflow.Definition{})
	require.NoError(t, err)
	require.JSONEq(t, `{"blocks":[],"edges":[]}`, string(empty))
}

// Values Postgres cannot store are refused as invalid params, never a 500 later.
func TestUnstorableValues(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, params := range []string{`{"value":"a\u0000b"}`, `{"value":{"k":[1,1e999]}}`} {
		out := c.Apply(workflow.Definition{}, ops(t, `[{"operation_type":"add","block_id":"x","type":"transform","params":`+params+`}]`))
		require.Len(t, out.Skipped, 1, params)
		require.Equal(t, workflow.ReasonInvalidParam, out.Skipped[0].ReasonCode)
		require.Contains(t, out.Skipped[0].Hint.Pointer, "/params/value")
	}
}
