package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	catalogpkg "svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

func catalog(t testing.TB) *catalogpkg.Catalog {
	t.Helper()
	c, err := catalogpkg.New(connectors.MustLoad())
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
		// Repairability: the names other APIs use for the operations.
		{"OpDelete", `{"operation_type":"delete","block_id":"ok"}`, workflow.ReasonUnknownOperationType, "remove", "/operation_type", []string{`Did you mean "remove"?`}},
		{"OpLink", `{"operation_type":"link","block_id":"ok","target_block_id":"start"}`, workflow.ReasonUnknownOperationType, "connect", "/operation_type", nil},
		{"OpUnlink", `{"operation_type":"unlink","block_id":"start","target_block_id":"fetch"}`, workflow.ReasonUnknownOperationType, "disconnect", "/operation_type", nil},
		{"OpSet", `{"operation_type":"set","block_id":"fetch","params":{}}`, workflow.ReasonUnknownOperationType, "update", "/operation_type", nil},
		{"OpEdit", `{"operation_type":"edit","block_id":"fetch","params":{}}`, workflow.ReasonUnknownOperationType, "update", "/operation_type", nil},
		{"OpCreate", `{"operation_type":"create","block_id":"x","type":"log"}`, workflow.ReasonUnknownOperationType, "add", "/operation_type", nil},
		// Repairability: an enum value in the wrong case.
		{"EnumCase", `{"operation_type":"update","block_id":"fetch","params":{"method":"get"}}`, workflow.ReasonInvalidParam, "GET", "/params/method", []string{`Did you mean "GET"?`}},
		// L1: what the pattern lets through but the orchestrator could not use.
		{"DurationOverflow", `{"operation_type":"add","block_id":"w","type":"wait","params":{"duration":"9999999999h"}}`, workflow.ReasonInvalidParam, "", "/params/duration", []string{"go-duration", "rule: format"}},
		{"TimeoutOverflow", `{"operation_type":"add","block_id":"w","type":"wait","params":{"signal":"go","timeout":"9999999999h"}}`, workflow.ReasonInvalidParam, "", "/params/timeout", []string{"rule: format"}},
		{"FailAttemptsHuge", `{"operation_type":"add","block_id":"f","type":"fail","params":{"message":"m","fail_attempts":1e300}}`, workflow.ReasonInvalidParam, "", "/params/fail_attempts", []string{"rule: maximum"}},
		{"FailAttempts101", `{"operation_type":"add","block_id":"f","type":"fail","params":{"message":"m","fail_attempts":101}}`, workflow.ReasonInvalidParam, "", "/params/fail_attempts", []string{"rule: maximum"}},
		{"InputSchemaBadRef", `{"operation_type":"add","block_id":"t","type":"trigger.manual","params":{"input_schema":{"$ref":"#/nope"}}}`, workflow.ReasonInvalidParam, "", "/params/input_schema", []string{"compiles", "rule: x-json-schema"}},
		{"InputSchemaFileRef", `{"operation_type":"add","block_id":"t","type":"trigger.manual","params":{"input_schema":{"$ref":"file:///etc/passwd"}}}`, workflow.ReasonInvalidParam, "", "/params/input_schema", []string{"outside the schema"}},
		{"InputSchemaRemoteRef", `{"operation_type":"add","block_id":"t","type":"trigger.manual","params":{"input_schema":{"properties":{"a":{"$ref":"https://example.com/s.json"}}}}}`, workflow.ReasonInvalidParam, "", "/params/input_schema", []string{"outside the schema"}},
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
		name  string
		ops   string
		code  workflow.ValidationCode
		block string
		// dym is what to set at pointer: the whole repaired value of the param (or, for
		// no_trigger, the trigger type), not a fragment of it, so that a client can apply it
		// without parsing the message.
		dym     string
		inText  []string
		pointer string
	}{
		{"NoTrigger", `[{"operation_type":"add","block_id":"l","type":"log","params":{"message":"m"}}]`, workflow.ValidationNoTrigger, "", "trigger.manual", []string{"trigger.manual", `"l"`}, ""},
		{"MultipleTriggers", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"b","type":"trigger.webhook"}]`, workflow.ValidationMultipleTriggers, "b", "", nil, ""},
		{"TriggerIncoming", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"m"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"},{"operation_type":"add","block_id":"x","type":"log","params":{"message":"m"}},{"operation_type":"connect","block_id":"x","target_block_id":"a"}]`, workflow.ValidationTriggerHasIncomingEdge, "a", "", []string{`"x"`}, ""},
		{"Unreachable", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"m"}}]`, workflow.ValidationUnreachableBlock, "l", "", nil, ""},
		{"Missing", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log"},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationMissingRequiredParam, "l", "", []string{`"message"`}, "/params/message"},
		{"MissingOneOf", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"w","type":"wait"},{"operation_type":"connect","block_id":"a","target_block_id":"w"}]`, workflow.ValidationMissingRequiredParam, "w", "", []string{"duration", "until", "signal"}, "/params"},
		{"NotUpstream", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ steps.m.output }}"}},{"operation_type":"add","block_id":"m","type":"log","params":{"message":"x"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"},{"operation_type":"connect","block_id":"a","target_block_id":"m"}]`, workflow.ValidationUnknownReference, "l", "", []string{"steps.m", "not upstream"}, "/params/message"},
		{"NoSuchStep", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ steps.aa.output }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "{{ steps.a.output }}", []string{`"aa", which does not exist`}, "/params/message"},
		{"BadRoot", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ inptu.x }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "{{ input.x }}", []string{"inptu"}, "/params/message"},
		{"NotOutput", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ steps.a.result }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "{{ steps.a.output.result }}", nil, "/params/message"},
		{"BadTemplate", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ input. }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationInvalidExpression, "l", "", []string{"{{ input. }}"}, "/params/message"},
		{"Unclosed", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ input.x "}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationInvalidExpression, "l", "", []string{"not closed"}, "/params/message"},
		// A template that does not close has no whole repair: the guess a reference in it makes
		// (a block id) is not offered as the value to set.
		{"UnclosedWithABadReference", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"got {{ steps.aa.output }} then {{ oops"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationUnknownReference, "l", "", []string{`"aa", which does not exist`}, "/params/message"},
		{"BadCondition", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"input.n >"}},{"operation_type":"connect","block_id":"a","target_block_id":"c"}]`, workflow.ValidationInvalidExpression, "c", "", nil, "/params/expression"},
		// M3: a function the run will not have.
		{"UnknownFunction", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ upperr(input.name) }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationInvalidExpression, "l", "{{ upper(input.name) }}", []string{"upperr()", "builtins", "Did you mean upper()?"}, "/params/message"},
		{"UnknownFunctionInCondition", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"lenght(input.items) > 2"}},{"operation_type":"connect","block_id":"a","target_block_id":"c"}]`, workflow.ValidationInvalidExpression, "c", "len(input.items) > 2", nil, "/params/expression"}, //nolint:misspell // the misspelt function is the input under test
		{"MethodCall", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"l","type":"log","params":{"message":"{{ input.name.toUpper() }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"l"}]`, workflow.ValidationInvalidExpression, "l", "{{ upper(input.name) }}", []string{"no methods", "upper(input.name)"}, "/params/message"},
		// Repairability (5): a condition written as a template.
		{"WrappedCondition", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"{{ input.n > 5 }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"c"}]`, workflow.ValidationInvalidExpression, "c", "input.n > 5", []string{"bare expr-lang expression", `send "input.n > 5"`}, "/params/expression"},
		{"PartlyWrappedCondition", `[{"operation_type":"add","block_id":"a","type":"trigger.manual"},{"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"{{input.n}} > {{ input.m }}"}},{"operation_type":"connect","block_id":"a","target_block_id":"c"}]`, workflow.ValidationInvalidExpression, "c", "input.n > input.m", nil, "/params/expression"},
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

// Values Postgres cannot store are refused as invalid params, never a 500 later. jsonb keeps
// numbers as numeric: at most 16383 digits after the point, counting those an exponent adds.
func TestUnstorableValues(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	zeros := "0." + strings.Repeat("0", 20000)
	for _, params := range []string{
		`{"value":"a\u0000b"}`, `{"value":{"k":[1,1e999]}}`,
		`{"value":1e-20000}`, `{"value":[` + zeros + `]}`, `{"value":{"n":` + zeros + `1}}`, `{"value":0e-20000}`,
		`{"value":1e-16384}`, `{"value":1.5e-16383}`, `{"value":100e-16385}`, `{"value":0e99999999999999999999}`,
		`{"value":-1e-1073741823}`,
	} {
		out := c.Apply(workflow.Definition{}, ops(t, `[{"operation_type":"add","block_id":"x","type":"transform","params":`+params+`}]`))
		require.Len(t, out.Skipped, 1, params[:min(len(params), 40)])
		require.Equal(t, workflow.ReasonInvalidParam, out.Skipped[0].ReasonCode)
		require.Contains(t, out.Skipped[0].Hint.Pointer, "/params/value")
		require.Less(t, len(out.Skipped[0].Reason), 600, "the reason does not repeat a huge number")
	}
	// The limits themselves are storable (TestStoresWhatApplyAccepts stores them in Postgres).
	for _, n := range []string{"1e-16383", "0.5e-16382", "1.5e308", "-0", "0e-16383", "1" + strings.Repeat("0", 300)} {
		out := c.Apply(workflow.Definition{}, ops(t, `[{"operation_type":"add","block_id":"x","type":"transform","params":{"value":`+n+`}}]`))
		require.Empty(t, out.Skipped, n)
	}
}

// M2: an expression is at most 4 KB and nests brackets at most 64 deep, so that no stored
// workflow costs a long parse on every read. Issue 21: it has at most 1000 syntax nodes and
// nests loops at most 3 deep, as the engine that runs it requires.
func TestExpressionLimits(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, base))
	nested := func(n int) string { return strings.Repeat("(", n) + "input.n" + strings.Repeat(")", n) }
	long := func(n int) string { return "input.s == '" + strings.Repeat("x", n-len("input.s == ''")) + "'" }
	for _, tc := range []struct {
		name, op, pointer string
		ok                bool
	}{
		{"ConditionAtLength", `{"operation_type":"update","block_id":"check","params":{"expression":"` + long(4096) + `"}}`, "", true},
		{"ConditionTooLong", `{"operation_type":"update","block_id":"check","params":{"expression":"` + long(4097) + `"}}`, "/params/expression", false},
		{"ConditionAtDepth", `{"operation_type":"update","block_id":"check","params":{"expression":"` + nested(64) + `"}}`, "", true},
		{"ConditionTooDeep", `{"operation_type":"update","block_id":"check","params":{"expression":"` + nested(65) + ` > 1"}}`, "/params/expression", false},
		{"DeepInAString", `{"operation_type":"update","block_id":"check","params":{"expression":"input.s == '` + strings.Repeat("(", 100) + `'"}}`, "", true},
		{"TemplateTooDeep", `{"operation_type":"update","block_id":"ok","params":{"message":"a {{ input.x }} b {{ ` + nested(250) + ` }}"}}`, "/params/message", false},
		{"LoopsAtDepth", `{"operation_type":"update","block_id":"check","params":{"expression":"any(input.a, any(#.b, all(#.c, # > 1)))"}}`, "", true},
		{"LoopsTooDeep", `{"operation_type":"update","block_id":"check","params":{"expression":"any(input.a, any(#.b, any(#.c, all(#.d, # > 1))))"}}`, "/params/expression", false},
		{"TemplateLoopsTooDeep", `{"operation_type":"update","block_id":"ok","params":{"message":"{{ map(input.a, map(#, map(#, map(#, #)))) }}"}}`, "/params/message", false},
		{"TooManyNodes", `{"operation_type":"update","block_id":"check","params":{"expression":"` + strings.Repeat("1 + ", 700) + `1 > 0"}}`, "/params/expression", false},
		{"NestedTemplateTooLong", `{"operation_type":"update","block_id":"fetch","params":{"body":{"k":["{{ ` + long(5000) + ` }}"]}}}`, "/params/body/k/0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := c.Apply(seed.Definition, ops(t, "["+tc.op+"]"))
			if tc.ok {
				require.Empty(t, out.Skipped)
				return
			}
			require.Len(t, out.Skipped, 1)
			s := out.Skipped[0]
			require.Equal(t, workflow.ReasonInvalidParam, s.ReasonCode, s.Reason)
			require.Equal(t, tc.pointer, s.Hint.Pointer)
			require.Contains(t, s.Reason, "rule: x-expression")
			require.Less(t, len(s.Reason), 800)
		})
	}
}

// L1: an input_schema that compiles, with its references inside it, is accepted.
func TestInputSchemaCompiles(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	out := c.Apply(workflow.Definition{}, ops(t, `[{"operation_type":"add","block_id":"t","type":"trigger.manual","params":{"input_schema":
	 {"type":"object","properties":{"n":{"$ref":"#/$defs/count"}},"$defs":{"count":{"type":"integer","minimum":0}}}}}]`))
	require.Empty(t, out.Skipped)
}

// Repairability (3): setting another of wait's exactly-one params on update says how to
// switch in one update.
func TestExactlyOneOnUpdate(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	seed := c.Apply(workflow.Definition{}, ops(t, `[{"operation_type":"add","block_id":"w","type":"wait","params":{"duration":"1s"}}]`))
	require.Empty(t, seed.Skipped)
	out := c.Apply(seed.Definition, ops(t, `[{"operation_type":"update","block_id":"w","params":{"until":"2030-01-01T00:00:00Z"}}]`))
	require.Len(t, out.Skipped, 1)
	s := out.Skipped[0]
	require.Equal(t, workflow.ReasonInvalidParam, s.ReasonCode)
	require.Equal(t, "/params/until", s.Hint.Pointer)
	require.Contains(t, s.Reason, `already has "duration"`)
	require.Contains(t, s.Reason, `{"duration": null, "until": ...}`)
	require.Empty(t, s.Hint.Allowed, "allowed lists values, not the names of other params")

	out = c.Apply(seed.Definition, ops(t, `[{"operation_type":"update","block_id":"w","params":{"duration":null,"until":"2030-01-01T00:00:00Z"}}]`))
	require.Empty(t, out.Skipped, "the switch the reason describes works")
}

// Repairability (4): a dependentRequired violation says what to do in words, not in allowed.
func TestDependentRequiredText(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	out := c.Apply(workflow.Definition{}, ops(t, `[{"operation_type":"add","block_id":"w","type":"wait","params":{"duration":"1s","timeout":"5m"}}]`))
	require.Len(t, out.Skipped, 1)
	s := out.Skipped[0]
	require.Equal(t, "/params/timeout", s.Hint.Pointer)
	require.Contains(t, s.Reason, `"timeout" only applies with "signal": add "signal" or remove "timeout"`)
	require.Contains(t, s.Reason, `"signal" would replace "duration"`)
	require.Empty(t, s.Hint.Allowed)
}

// Issue 21: an expression stored before the engine's limits (or written where no patch
// checks them) is a validation error the run would otherwise only meet at its attempt.
func TestStoredExpressionOverTheEngineLimits(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	def := workflow.Definition{
		Blocks: []workflow.Block{
			{ID: "a", Type: "trigger.manual", Params: map[string]any{}},
			{ID: "t", Type: "transform", Params: map[string]any{"value": "{{ map(input.a, map(#, map(#, map(#, #)))) }}"}},
		},
		Edges: []workflow.Edge{{From: "a", To: "t"}},
	}
	var errs []workflow.ValidationError
	for _, e := range c.Validate(def) {
		if e.Code == workflow.ValidationInvalidExpression {
			errs = append(errs, e)
		}
	}
	require.Len(t, errs, 1, "%+v", errs)
	require.Equal(t, "t", errs[0].BlockID)
	require.Equal(t, "/params/value", errs[0].Pointer)
	require.Contains(t, errs[0].Message, "loops (map, filter, reduce, ...) may nest at most 3 deep")
}
