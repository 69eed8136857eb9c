package catalog

import (
	"encoding/json"
	"testing"

	"github.com/expr-lang/expr/conf"
	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/domain/repair"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// Each slip from another language is rewritten to an expression expr-lang compiles; valid
// expressions are left as they are, and so is what has no one fix.
func TestFixSyntax(t *testing.T) {
	t.Parallel()
	cfg := conf.CreateNew()
	for in, want := range map[string]string{
		"input.n = 5":                  "input.n == 5",
		"input.n === 5":                "input.n == 5",
		"input.n !== 5":                "input.n != 5",
		"input.a <> 1":                 "input.a != 1",
		"input.ok == True":             "input.ok == true",
		"input.x == None":              "input.x == nil",
		"input.x === undefined":        "input.x == nil",
		"input.x IS NOT NULL":          "input.x != nil",
		"input.a > 1 AND NOT input.b":  "input.a > 1 and not input.b",
		"input.n > 5 &&":               "input.n > 5",
		"(input.n > 5":                 "(input.n > 5)",
		"input.n > 5)":                 "input.n > 5",
		`input.s.startsWith("a")`:      `input.s startsWith "a"`,
		`input.name.toUpperCase()`:     `upper(input.name)`,
		`input.s == "a = b" || x = 1`:  `input.s == "a = b" || x == 1`,
		`input.null == null`:           `input.null == nil`,
		"input.n >= 5 && input.m <= 3": "input.n >= 5 && input.m <= 3",
		"let x = 1; x == 1":            "let x = 1; x == 1",
	} {
		got := repair.FixSyntax(in)
		require.Equal(t, want, got, in)
		_, err := parseTree(got, cfg)
		require.NoError(t, err, got)
	}
	// No one fix: where the operand or the closing parenthesis of a call goes is not known.
	for _, in := range []string{"input.n >", "len(input.items > 0"} {
		got := repair.FixSyntax(in)
		_, err := parseTree(got, cfg)
		require.Error(t, err, "%q became %q", in, got)
	}
}

// Where a guess would be a coin toss, the reply carries no did_you_mean: a hint that applies
// and leaves the workflow wrong is worse than none.
func TestNoGuessWhereAmbiguous(t *testing.T) {
	t.Parallel()
	c, err := New(loadCatalog(t))
	require.NoError(t, err)
	str := func(s string) *string { return &s }
	add := func(id, typ string, params map[string]any) workflow.Op {
		return workflow.Op{Type: "add", BlockID: id, BlockType: typ, Params: params, HasParams: params != nil}
	}
	base := []workflow.Op{add("start", "trigger.manual", nil), add("fetch", "http.request", map[string]any{"method": "GET", "url": "https://a.example"}),
		{Type: "connect", BlockID: "start", TargetBlockID: "fetch"}}
	for name, op := range map[string]workflow.Op{
		"MadeUpMethod":      add("x", "http.request", map[string]any{"method": "FETCH", "url": "https://a.example"}),
		"BareNumber":        add("x", "wait", map[string]any{"duration": "30"}),
		"MissingUnit":       add("x", "wait", map[string]any{"duration": "2h30"}),
		"MinusOne":          add("x", "fail", map[string]any{"message": "m", "fail_attempts": jsonNumber("-1")}),
		"Fraction":          add("x", "http.request", map[string]any{"method": "GET", "url": "https://a.example", "timeout_ms": jsonNumber("1500.5")}),
		"TooBig":            add("x", "http.request", map[string]any{"method": "GET", "url": "https://a.example", "timeout_ms": jsonNumber("600000")}),
		"NoSuchType":        add("x", "kafka.publish", nil),
		"BranchOnAction":    {Type: "connect", BlockID: "start", TargetBlockID: "fetch", Branch: str("true")},
		"UnrelatedParam":    add("x", "log", map[string]any{"message": "m", "color": "red"}),
		"URLWithSpace":      add("x", "http.request", map[string]any{"method": "GET", "url": "not a url"}),
		"UntilWithoutZone":  add("x", "wait", map[string]any{"until": "2030-01-01 10:00"}),
		"InputAsTriggerArg": add("t2", "trigger.manual", map[string]any{"input": map[string]any{"n": jsonNumber("5")}}),
	} {
		out := c.Apply(workflow.Definition{}, append(append([]workflow.Op(nil), base...), op))
		require.NotEmpty(t, out.Skipped, name)
		for _, s := range out.Skipped {
			for _, p := range s.AllProblems() {
				require.False(t, p.Hint.Suggests(), "%s: %s suggests %q %v", name, p.ReasonCode, p.Hint.DidYouMean, p.Hint.Value)
			}
		}
	}
	// References: a sibling on another branch of another type, a name that is no block and no
	// scope, a call whose closing parenthesis is missing.
	for name, value := range map[string]string{
		"Sibling":      "{{ steps.other.output.message }}",
		"OutputAlone":  "{{ output.body }}",
		"UnclosedCall": "{{ len(input.items > 0 }}",
		"OpenOutput":   "{{ steps.start.output.anything.at.all }}",
	} {
		def := c.Apply(workflow.Definition{}, append(append([]workflow.Op(nil), base...),
			add("other", "log", map[string]any{"message": "x"}), workflow.Op{Type: "connect", BlockID: "start", TargetBlockID: "other"},
			add("l", "log", map[string]any{"message": value}), workflow.Op{Type: "connect", BlockID: "fetch", TargetBlockID: "l"})).Definition
		errs := c.Validate(def)
		if name == "OpenOutput" {
			require.Empty(t, errs, "a trigger's output is the run input: any field may be read")
			continue
		}
		require.NotEmpty(t, errs, name)
		for _, e := range errs {
			require.Empty(t, e.DidYouMean, "%s: %s", name, e.Message)
		}
	}
}

// Fields read from an output are checked only where the output's fields are known, and the
// repair goes into the one field of unknown content.
func TestOutputReferences(t *testing.T) {
	t.Parallel()
	c, err := New(loadCatalog(t))
	require.NoError(t, err)
	for value, want := range map[string]string{
		"{{ steps.fetch.output.body.anything }}":  "",
		"{{ steps.fetch.output.headers.etag }}":   "",
		"{{ steps.fetch.output.truncated }}":      "",
		"{{ steps.fetch.output.total }}":          "{{ steps.fetch.output.body.total }}",
		"{{ steps.fetch.output.status_code }}":    "{{ steps.fetch.output.status }}",
		"{{ steps.fetch.output.status.code }}":    "-",
		"{{ steps.t.output.nested.deep }}":        "",
		"{{ steps.t.output.count }}":              "",
		"{{ steps.t.output.cnt }}":                "{{ steps.t.output.count }}",
		"{{ steps.t.output.count.x }}":            "-",
		"{{ steps.t.output.dynamic.anything }}":   "",
		"{{ steps.fetch.output[\"total\"] }}":     "",
		"{{ steps.fetch.output.body?.total }}":    "",
		"{{ len(steps.fetch.output.headers) }}":   "",
		"{{ steps.fetch.output.body.total + 1 }}": "",
	} {
		def := c.Apply(workflow.Definition{}, []workflow.Op{
			{Type: "add", BlockID: "start", BlockType: "trigger.manual"},
			{Type: "add", BlockID: "fetch", BlockType: "http.request", HasParams: true, Params: map[string]any{"method": "GET", "url": "https://a.example"}},
			{Type: "add", BlockID: "t", BlockType: "transform", HasParams: true, Params: map[string]any{"value": map[string]any{
				"count": jsonNumber("1"), "nested": map[string]any{"deep": "x"}, "dynamic": "{{ input.x }}"}}},
			{Type: "add", BlockID: "l", BlockType: "log", HasParams: true, Params: map[string]any{"message": value}},
			{Type: "connect", BlockID: "start", TargetBlockID: "fetch"},
			{Type: "connect", BlockID: "fetch", TargetBlockID: "t"},
			{Type: "connect", BlockID: "t", TargetBlockID: "l"},
		}).Definition
		errs := c.Validate(def)
		switch want {
		case "":
			require.Empty(t, errs, value)
		case "-":
			require.Len(t, errs, 1, value)
			require.Equal(t, workflow.ValidationUnknownReference, errs[0].Code, value)
			require.Empty(t, errs[0].DidYouMean, value)
		default:
			require.Len(t, errs, 1, value)
			require.Equal(t, workflow.ValidationUnknownReference, errs[0].Code, value)
			require.Equal(t, want, errs[0].DidYouMean, value)
		}
	}
}

func loadCatalog(t *testing.T) []connectors.Entry {
	t.Helper()
	entries, err := connectors.Load()
	require.NoError(t, err)
	return entries
}

func jsonNumber(s string) json.Number { return json.Number(s) }

// A reply takes back what only holds while a skipped operation stays skipped.
func TestInLightOf(t *testing.T) {
	t.Parallel()
	c, err := New(loadCatalog(t))
	require.NoError(t, err)
	batch := []workflow.Op{
		{Type: "add", BlockID: "start", BlockType: "trigger.manual"},
		{Type: "add", BlockID: "fetch", BlockType: "fetch", HasParams: true, Params: map[string]any{"method": "GET", "url": "https://a.example"}},
		{Type: "add", BlockID: "fetch2", BlockType: "http.request", HasParams: true, Params: map[string]any{"method": "GET", "url": "https://a.example"}},
		{Type: "add", BlockID: "l", BlockType: "log", HasParams: true, Params: map[string]any{"message": "{{ steps.fetch.output.body }}"}},
		{Type: "connect", BlockID: "start", TargetBlockID: "fetch2"},
		{Type: "connect", BlockID: "start", TargetBlockID: "fetch"},
		{Type: "connect", BlockID: "fetch", TargetBlockID: "l"},
		{Type: "connect", BlockID: "fetch2", TargetBlockID: "l"},
	}
	out := c.Apply(workflow.Definition{}, batch)
	require.Len(t, out.Skipped, 3) // the add of fetch and its two connects
	errs := c.Validate(out.Definition)
	var ref *workflow.ValidationError
	for i := range errs {
		if errs[i].Code == workflow.ValidationUnknownReference {
			ref = &errs[i]
		}
	}
	require.NotNil(t, ref)
	require.Equal(t, "{{ steps.fetch2.output.body }}", ref.DidYouMean, "alone, the definition reads as a typo of fetch2")
	shown := c.InLightOf(errs, batch, out.Skipped)
	for _, e := range shown {
		if e.Code == workflow.ValidationUnknownReference {
			require.Empty(t, e.DidYouMean, "fetch is missing because its add was skipped: the repair is that add's")
			require.Contains(t, e.Message, "repair that add")
			require.NotContains(t, e.Message, "Repaired,")
		}
	}
	require.Equal(t, "{{ steps.fetch2.output.body }}", ref.DidYouMean, "the cached errors are not changed")

	// The batch's own trigger skipped: no other trigger is suggested.
	batch = []workflow.Op{
		{Type: "add", BlockID: "t", BlockType: "cron"},
		{Type: "add", BlockID: "l", BlockType: "log", HasParams: true, Params: map[string]any{"message": "x"}},
		{Type: "connect", BlockID: "t", TargetBlockID: "l"},
	}
	out = c.Apply(workflow.Definition{}, batch)
	errs = c.Validate(out.Definition)
	require.Equal(t, "trigger.manual", errs[0].DidYouMean)
	require.Equal(t, []string{"l"}, errs[0].NoIncomingEdge)
	shown = c.InLightOf(errs, batch, out.Skipped)
	require.Equal(t, workflow.ValidationNoTrigger, shown[0].Code)
	require.Empty(t, shown[0].DidYouMean)
	require.Empty(t, shown[0].NoIncomingEdge)
}
