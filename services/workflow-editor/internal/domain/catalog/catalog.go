// Package catalog is the compiled connector catalog: every registered block type with its
// params schema compiled, and what needs it. It applies a batch of edit operations to a
// definition (each operation checked against its connector's params, and skipped with a
// reason and a hint when it cannot apply) and validates a definition's graph, templates and
// expressions. The workflow aggregate takes it as a workflow.Applier; the guesses behind the
// hints come from package repair.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
	"svc.dev/services/workflow-editor/internal/domain/repair"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// conditionType is the block type whose outgoing edges carry a branch ("true" or "false").
const conditionType = "condition"

// Catalog is the set of registered block types with their compiled params schemas. It is built
// once from the shared catalog data (svc.dev/proto/connectors) and only read afterwards.
type Catalog struct {
	byType map[string]*Connector
	types  []string
	// aliases maps the normalized aliases of the types (catalog data) to the type.
	aliases map[string]string
	entries []connectors.Entry
	printer *message.Printer
	exprs   *exprCache
	checks  *checkCache
}

// Connector is one registered block type.
type Connector struct {
	entry connectors.Entry
	// schema is params without its top-level required list and exactly-one-of group: a block
	// may be added before all its params are known, and what is missing is reported as a
	// validation error of the workflow, not a skipped operation.
	schema     *jsonschema.Schema
	params     map[string]paramInfo
	public     []string
	required   []string
	exactlyOne []string
	// aliases maps the normalized aliases of the public params (catalog data) to the param.
	aliases map[string]string
	// output is what is known of the fields of the output (nil: nothing).
	output *shape
	// scoped are the positions whose templates may use only some roots (scope.go).
	scoped []scopedParam
}

type paramInfo struct {
	schema     map[string]any // the param's own schema, as the catalog writes it
	hidden     bool
	expression bool
	jsonSchema bool // the value is itself a JSON Schema ("x-json-schema": true)
}

// NewCatalog compiles entries. A schema that does not compile is an error: the catalog is
// data shipped with the binary, so that is a bug its own test catches first.
func New(entries []connectors.Entry) (*Catalog, error) {
	c := &Catalog{byType: map[string]*Connector{}, aliases: map[string]string{}, entries: entries, printer: message.NewPrinter(language.English), exprs: newExprCache(), checks: newCheckCache()}
	for _, e := range entries {
		conn, err := compileConnector(e)
		if err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", e.Type, err)
		}
		c.byType[e.Type] = conn
		c.types = append(c.types, e.Type)
		for _, a := range e.Aliases {
			c.aliases[repair.Normalize(a)] = e.Type
		}
	}
	return c, nil
}

func compileConnector(e connectors.Entry) (*Connector, error) {
	var schema map[string]any
	if err := json.Unmarshal(e.Params, &schema); err != nil {
		return nil, err
	}
	conn := &Connector{entry: e, params: map[string]paramInfo{}, aliases: map[string]string{}}
	var output map[string]any
	if len(e.OutputSchema) > 0 {
		if err := json.Unmarshal(e.OutputSchema, &output); err != nil {
			return nil, err
		}
	}
	conn.output = shapeOfSchema(output)
	conn.scoped = scopedParams(schema, nil)
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, raw := range props {
			p, _ := raw.(map[string]any)
			info := paramInfo{schema: p}
			info.hidden, _ = p["hidden"].(bool)
			info.expression, _ = p["x-expression"].(bool)
			info.jsonSchema, _ = p["x-json-schema"].(bool)
			conn.params[name] = info
			if !info.hidden {
				conn.public = append(conn.public, name)
				aliases, _ := p["x-aliases"].([]any)
				for _, a := range aliases {
					if s, ok := a.(string); ok {
						conn.aliases[repair.Normalize(s)] = name
					}
				}
			}
		}
	}
	sort.Strings(conn.public)
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				conn.required = append(conn.required, s)
			}
		}
	}
	delete(schema, "required")
	if group := exactlyOneGroup(schema["oneOf"]); group != nil {
		conn.exactlyOne = group
		delete(schema, "oneOf")
	}
	var err error
	conn.schema, err = connectors.CompileParams(e.Type, schema)
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// exactlyOneGroup recognises a top-level oneOf whose branches each only require one param.
func exactlyOneGroup(v any) []string {
	branches, ok := v.([]any)
	if !ok || len(branches) == 0 {
		return nil
	}
	var group []string
	for _, b := range branches {
		m, ok := b.(map[string]any)
		if !ok || len(m) != 1 {
			return nil
		}
		req, ok := m["required"].([]any)
		if !ok || len(req) != 1 {
			return nil
		}
		name, ok := req[0].(string)
		if !ok {
			return nil
		}
		group = append(group, name)
	}
	return group
}

// Lookup returns the connector of a block type.
func (c *Catalog) Lookup(blockType string) (*Connector, bool) {
	conn, ok := c.byType[blockType]
	return conn, ok
}

// suggestType is the registered type a model most likely meant by t: the type t is an alias
// of (catalog data: "fetch" is http.request), else the closest by spelling.
func (c *Catalog) suggestType(t string) string {
	if typ, ok := c.aliases[repair.Normalize(t)]; ok && t != "" {
		return typ
	}
	return repair.Closest(t, c.types)
}

// suggestParam is the public param a model most likely meant by name: the param name is an
// alias of, else the closest by spelling.
func (k *Connector) suggestParam(name string) string {
	if p, ok := k.aliases[repair.Normalize(name)]; ok && name != "" {
		return p
	}
	c := repair.Closest(name, k.public)
	// A short name inside a longer param is no spelling of it: "input" (the run input, sent
	// to a trigger) is not "input_schema".
	if n, cn := repair.Normalize(name), repair.Normalize(c); c != "" && n != cn && strings.Contains(cn, n) && 2*len(n) < len(cn) {
		return ""
	}
	return c
}

// Types lists the registered block types in catalog order.
func (c *Catalog) Types() []string { return append([]string(nil), c.types...) }

// Public lists the catalog as clients see it: hidden params left out.
func (c *Catalog) Public() []connectors.Entry {
	out := make([]connectors.Entry, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.Public()
	}
	return out
}

// Type is the connector's block type.
func (k *Connector) Type() string { return k.entry.Type }

// IsTrigger reports whether blocks of this type start a workflow.
func (k *Connector) IsTrigger() bool { return k.entry.Category == connectors.CategoryTrigger }

// branches reports whether the outgoing edges of this type carry a branch.
func (k *Connector) branches() bool { return k.entry.Type == conditionType }

// paramViolation is why params are not acceptable for a connector.
type paramViolation struct {
	code    workflow.ReasonCode
	name    string // the top-level param concerned
	pointer string // JSON Pointer into params ("/method", "/headers/X")
	rule    string // the JSON Schema keyword broken, for invalid_param
	detail  string
	hint    workflow.Hint
}

// checkParams tests params (the block's whole params after the operation) and returns every
// problem found, in the order a model can best act on: hidden params, then unknown ones, then
// what could not be stored or parsed, then each value against the schema. An unknown param
// with a suggestion (an alias or a misspelling of a param) has its value checked under the
// name suggested, so that one reply says both what to rename and what to change in it; the
// pointers of those problems name the param by the name suggested. Templated strings
// ({{ expr }}) are only checked to be strings where a string is allowed: their value is known
// at run time. touched are the params the operation sent; before the block's params before it
// (nil for an add).
func (c *Catalog) checkParams(k *Connector, params map[string]any, touched []string, before map[string]any) []*paramViolation {
	var out []*paramViolation
	renamed := make(map[string]any, len(params))
	for name, v := range params {
		renamed[name] = v
	}
	sent := make([]string, 0, len(touched))
	for _, name := range touched {
		if info, ok := k.params[name]; ok && info.hidden {
			out = append(out, &paramViolation{code: workflow.ReasonHiddenParam, name: name, pointer: "/" + escapePointer(name)})
			delete(renamed, name)
			continue
		}
		sent = append(sent, name)
	}
	checked := make([]string, 0, len(sent))
	for _, name := range sent {
		if _, ok := k.params[name]; ok {
			checked = append(checked, name)
			continue
		}
		dym := k.suggestParam(name)
		out = append(out, &paramViolation{code: workflow.ReasonUnknownParam, name: name, pointer: "/" + escapePointer(name),
			hint: workflow.Hint{DidYouMean: dym, Allowed: k.public}})
		v, had := renamed[name]
		delete(renamed, name)
		if _, taken := renamed[dym]; dym != "" && had && !taken && !slices.Contains(sent, dym) {
			renamed[dym] = v
			checked = append(checked, dym)
		}
	}
	if ptr, ok := findNUL(renamed, ""); ok {
		return append(out, &paramViolation{code: workflow.ReasonInvalidParam, name: topName(ptr), pointer: ptr, rule: "string",
			detail: "strings may not contain the NUL character (U+0000)"})
	}
	if ptr, detail, ok := findUnstorableNumber(renamed, ""); ok {
		return append(out, &paramViolation{code: workflow.ReasonInvalidParam, name: topName(ptr), pointer: ptr, rule: "number", detail: detail})
	}
	if v := k.checkExpressions(renamed, checked); v != nil {
		return append(out, v)
	}
	if v := c.checkTemplateScopes(k, renamed, checked); v != nil {
		return append(out, v)
	}
	if v := k.checkExactlyOne(renamed, checked, before); v != nil {
		out = append(out, v)
	}
	seen := map[string]int{}
	err := k.schema.Validate(toSchemaValue(renamed))
	if err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return append(out, &paramViolation{code: workflow.ReasonInvalidParam, rule: "schema", detail: err.Error()})
		}
		for _, leaf := range leaves(ve) {
			if templatedAt(renamed, leaf.InstanceLocation) {
				continue
			}
			v := c.violationOf(k, renamed, leaf)
			// One problem per value: the schema may break several rules of one value (a
			// pattern and a format); the first with a suggestion says the most.
			if i, dup := seen[v.pointer]; dup {
				if !out[i].hint.Suggests() && v.hint.Suggests() {
					out[i] = v
				}
				continue
			}
			seen[v.pointer] = len(out)
			out = append(out, v)
		}
	}
	if v := k.checkJSONSchemas(renamed, checked); v != nil {
		if _, dup := seen[v.pointer]; !dup {
			out = append(out, v)
		}
	}
	if len(out) > 0 {
		// The operation is skipped anyway: say now what its expressions will need, so that
		// the repaired operation does not come back with invalid_expression.
		for _, name := range checked {
			if _, dup := seen["/"+escapePointer(name)]; dup || !k.isExpression(name) {
				continue
			}
			if src, ok := renamed[name].(string); ok && !hasTemplate(src) {
				if v := c.expressionSlip(name, src); v != nil {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// expressionSlip is the problem of an expression param that does not parse or names what is
// not in scope, with its repair when a slip from another language explains it; nil when the
// expression is fine as far as can be told outside the graph.
func (c *Catalog) expressionSlip(name, src string) *paramViolation {
	bad := func(s string) (string, bool) {
		refs, err := c.exprs.references(s)
		if err != nil {
			return err.Error(), true
		}
		for _, r := range refs {
			if r.problem != "" && r.step == "" && !r.call {
				return r.problem, true
			}
		}
		return "", false
	}
	why, isBad := bad(src)
	if !isBad {
		return nil
	}
	v := &paramViolation{code: workflow.ReasonInvalidParam, name: name, pointer: "/" + escapePointer(name), rule: "x-expression",
		detail: "it is not a valid expr-lang expression (" + why + "); the block would have an invalid_expression"}
	if fixed := repair.FixSyntax(src); fixed != src {
		if _, still := bad(fixed); !still {
			v.hint.DidYouMean = fixed
		}
	}
	return v
}

// checkExactlyOne refuses params that set two or more of the exactly-one-of group. When an
// update sets one while the block keeps another, it says how to switch in one update.
func (k *Connector) checkExactlyOne(params map[string]any, touched []string, before map[string]any) *paramViolation {
	present := presentOf(params, k.exactlyOne)
	if len(present) < 2 {
		return nil
	}
	sent := map[string]bool{}
	for _, t := range touched {
		sent[t] = true
	}
	var kept, set []string
	for _, p := range present {
		if _, had := before[p]; had && !sent[p] {
			kept = append(kept, p)
		} else {
			set = append(set, p)
		}
	}
	v := &paramViolation{code: workflow.ReasonInvalidParam, rule: "oneOf"}
	if len(kept) > 0 && len(set) > 0 {
		v.name = set[0]
		nulls := make([]string, len(kept))
		for i, p := range kept {
			nulls[i] = fmt.Sprintf("%q: null", p)
		}
		v.detail = fmt.Sprintf("%s takes exactly one of %s, and the block already has %s. To switch to %q, remove the other in the same update: send params {%s, %q: ...} (null removes a param)",
			k.Type(), listOf(k.exactlyOne, 10), listOf(kept, 10), v.name, strings.Join(nulls, ", "), v.name)
	} else {
		v.name = present[1]
		v.detail = fmt.Sprintf("set exactly one of %s, but %s are set: send only one of them", listOf(k.exactlyOne, 10), listOf(present, 10))
	}
	v.pointer = "/" + escapePointer(v.name)
	return v
}

// The limits of one expression (a condition's expression, or the inside of one {{ }}). Every
// read validates a workflow, and an expression's cost to parse grows with its length and how
// deep its brackets nest; real ones are a line or two. The engine holds an expression to the
// same length, node count and loop nesting when it compiles it (proto/connectors/expression).
const (
	MaxExpressionLength = expression.MaxSourceBytes
	MaxExpressionDepth  = 64
)

// checkExpressions holds the expressions in the params the operation sent to the limits.
func (k *Connector) checkExpressions(params map[string]any, touched []string) *paramViolation {
	for _, name := range touched {
		v, ok := params[name]
		if !ok {
			continue
		}
		ptr := "/" + escapePointer(name)
		if s, isStr := v.(string); isStr && k.isExpression(name) {
			if detail := expressionProblem(s); detail != "" {
				return &paramViolation{code: workflow.ReasonInvalidParam, name: name, pointer: ptr, rule: "x-expression", detail: detail}
			}
			continue
		}
		if p, detail, bad := findBadTemplate(v, ptr); bad {
			return &paramViolation{code: workflow.ReasonInvalidParam, name: name, pointer: p, rule: "x-expression", detail: detail}
		}
	}
	return nil
}

// findBadTemplate returns the pointer of the first string whose {{ }} templates break the
// expression limits.
func findBadTemplate(v any, ptr string) (string, string, bool) {
	switch x := v.(type) {
	case string:
		if !hasTemplate(x) {
			return "", "", false
		}
		exprs, _ := splitTemplates(x) // an unclosed {{ is a validation error, not a skip
		for _, e := range exprs {
			if detail := expressionProblem(e); detail != "" {
				return ptr, "the template {{ " + truncate(e, 40) + " }}: " + detail, true
			}
		}
	case map[string]any:
		for _, key := range sortedKeys(x) {
			if p, d, bad := findBadTemplate(x[key], ptr+"/"+escapePointer(key)); bad {
				return p, d, true
			}
		}
	case []any:
		for i, e := range x {
			if p, d, bad := findBadTemplate(e, fmt.Sprintf("%s/%d", ptr, i)); bad {
				return p, d, true
			}
		}
	}
	return "", "", false
}

// expressionProblem says why an expression breaks the limits, or "".
func expressionProblem(src string) string {
	if len(src) > MaxExpressionLength {
		return fmt.Sprintf("an expression may be at most %d bytes, and this one is %d; compute parts of it in earlier blocks (a transform block outputs any value) and refer to them with steps.<block_id>.output",
			MaxExpressionLength, len(src))
	}
	if d := nesting(src); d > MaxExpressionDepth {
		return fmt.Sprintf("an expression may nest brackets ( [ { at most %d deep, and this one nests them %d deep; write it flatter, or compute parts of it in earlier blocks",
			MaxExpressionDepth, d)
	}
	if err := expression.Check(src); err != nil {
		return tooLarge(err)
	}
	return ""
}

// tooLarge is the hint for an expression over the engine's node or loop-nesting limits.
func tooLarge(err error) string {
	return strings.TrimPrefix(err.Error(), expression.ErrTooLarge.Error()+": ") +
		"; split it: compute parts of it in earlier transform blocks and refer to them with steps.<block_id>.output"
}

// nesting is how deep the brackets of an expr-lang expression nest, string literals aside.
func nesting(src string) int {
	depth, deepest := 0, 0
	var quote byte
	for i := 0; i < len(src); i++ {
		c := src[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote != '`':
				i++
			case c == quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'', '`':
			quote = c
		case '(', '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ')', ']', '}':
			depth = max(0, depth-1)
		}
	}
	return deepest
}

// checkJSONSchemas compiles the params marked "x-json-schema" that the operation sent, the way
// the orchestrator will compile them: a schema that only fails at run time would refuse every
// run.
func (k *Connector) checkJSONSchemas(params map[string]any, touched []string) *paramViolation {
	for _, name := range touched {
		v, ok := params[name]
		if !ok || !k.params[name].jsonSchema {
			continue
		}
		if s, isStr := v.(string); isStr && hasTemplate(s) {
			continue
		}
		if _, err := connectors.CompileClientSchema(v); err != nil {
			return &paramViolation{code: workflow.ReasonInvalidParam, name: name, pointer: "/" + escapePointer(name), rule: "x-json-schema",
				detail: "it must be a JSON Schema (draft 2020-12 unless its $schema says otherwise) that compiles, with every $ref inside it (use $defs); it does not: " + truncate(strings.Join(strings.Fields(err.Error()), " "), 300)}
		}
	}
	return nil
}

func (c *Catalog) violationOf(k *Connector, params map[string]any, leaf *jsonschema.ValidationError) *paramViolation {
	ptr := ""
	for _, tok := range leaf.InstanceLocation {
		ptr += "/" + escapePointer(tok)
	}
	v := &paramViolation{code: workflow.ReasonInvalidParam, pointer: ptr, name: topName(ptr),
		rule: strings.Join(leaf.ErrorKind.KeywordPath(), "/"), detail: leaf.ErrorKind.LocalizedString(c.printer)}
	switch e := leaf.ErrorKind.(type) {
	case *kind.Enum:
		v.hint.Allowed = jsonStrings(e.Want)
		if got, ok := e.Got.(string); ok {
			v.hint.DidYouMean = repair.ClosestValue(strings.TrimSpace(got), v.hint.Allowed)
		}
	case *kind.Const:
		v.hint.Allowed = jsonStrings([]any{e.Want})
	case *kind.Type:
		// allowed holds values, never type names: a model pastes it in as the value. The
		// value meant, where it has one obvious form of the right type, is did_you_mean.
		v.hint.Value = k.suggestValue(params, leaf.InstanceLocation)
	case *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum, *kind.ExclusiveMaximum:
		v.hint.AllowedValues, v.hint.Value = k.numberRange(params, leaf.InstanceLocation)
	case *kind.Pattern, *kind.Format:
		if s := k.suggestString(params, leaf.InstanceLocation); s != "" {
			v.hint.DidYouMean = s
		}
	case *kind.DependentRequired:
		// Allowed is for values; what is missing here is another param, so the text says it.
		v.pointer = ptr + "/" + escapePointer(e.Prop)
		v.detail = fmt.Sprintf("%q only applies with %s: add %s or remove %q", e.Prop, listOf(e.Missing, 10), listOf(e.Missing, 10), e.Prop)
		if others := presentOf(params, k.exactlyOne); len(others) > 0 && slices.Contains(k.exactlyOne, e.Missing[0]) {
			v.detail += fmt.Sprintf(" (%s takes exactly one of %s, so %q would replace %s)", k.Type(), listOf(k.exactlyOne, 10), e.Missing[0], listOf(others, 10))
		}
	case *kind.AdditionalProperties:
		if len(e.Properties) > 0 {
			v.pointer = ptr + "/" + escapePointer(e.Properties[0])
		}
	}
	if v.name == "" {
		v.name = topName(v.pointer)
	}
	return v
}

// missingParams lists what the block still needs before it can run: required params it lacks,
// and the exactly-one-of group when none of it is set.
func (k *Connector) missingParams(params map[string]any) (missing []string, oneOf []string) {
	for _, r := range k.required {
		if _, ok := params[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(k.exactlyOne) > 0 && len(presentOf(params, k.exactlyOne)) == 0 {
		oneOf = k.exactlyOne
	}
	return missing, oneOf
}

// expressionParams lists the top-level params that hold a bare expr-lang expression.
func (k *Connector) isExpression(name string) bool { return k.params[name].expression }

func presentOf(params map[string]any, names []string) []string {
	var present []string
	for _, n := range names {
		if _, ok := params[n]; ok {
			present = append(present, n)
		}
	}
	return present
}

// leaves flattens a validation error tree into its most specific errors, in order.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// templatedAt reports whether the value at loc, or one of its containers, is a string holding a
// template: such a value is only known at run time.
func templatedAt(params map[string]any, loc []string) bool {
	var cur any = params
	for _, tok := range loc {
		if s, ok := cur.(string); ok {
			return hasTemplate(s)
		}
		switch v := cur.(type) {
		case map[string]any:
			cur = v[tok]
		case []any:
			i := 0
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(v) {
				return false
			}
			cur = v[i]
		default:
			return false
		}
	}
	s, ok := cur.(string)
	return ok && hasTemplate(s)
}

// toSchemaValue converts params to the value types the validator expects (json.Number for
// numbers); params decoded with UseNumber already are, so this only copies the top level.
func toSchemaValue(params map[string]any) any {
	m := make(map[string]any, len(params))
	for k, v := range params {
		m[k] = v
	}
	return m
}

// findNUL returns the pointer of the first string (or key) holding U+0000, which Postgres
// cannot store in jsonb.
func findNUL(v any, ptr string) (string, bool) {
	switch x := v.(type) {
	case string:
		return ptr, strings.ContainsRune(x, 0)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			p := ptr + "/" + escapePointer(k)
			if strings.ContainsRune(k, 0) {
				return p, true
			}
			if found, ok := findNUL(x[k], p); ok {
				return found, true
			}
		}
	case []any:
		for i, e := range x {
			if found, ok := findNUL(e, fmt.Sprintf("%s/%d", ptr, i)); ok {
				return found, true
			}
		}
	}
	return "", false
}

// findUnstorableNumber returns the pointer of the first number that Postgres could not store
// or no connector could use, and why.
func findUnstorableNumber(v any, ptr string) (string, string, bool) {
	switch x := v.(type) {
	case json.Number:
		if why := unstorableNumber(x); why != "" {
			return ptr, why, true
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if found, why, ok := findUnstorableNumber(x[k], ptr+"/"+escapePointer(k)); ok {
				return found, why, true
			}
		}
	case []any:
		for i, e := range x {
			if found, why, ok := findUnstorableNumber(e, fmt.Sprintf("%s/%d", ptr, i)); ok {
				return found, why, true
			}
		}
	}
	return "", "", false
}

// The limits of Postgres's numeric type, which jsonb stores numbers in (Postgres 15,
// src/backend/utils/adt/numeric.c): at most 16383 digits after the decimal point (the display
// scale, which an exponent adds to: 1e-20000 has 20000, and so does 0e-20000), the first
// significant digit at most 131071 places before it, and an exponent below (2^31-1)/2 in size.
const (
	pgMaxScale    = 16383
	pgMaxWeight   = 131071
	pgMaxExponent = 1<<30 - 1
)

// unstorableNumber says why the JSON number n cannot be a param, or "": it must fit a float64
// (what connectors compute with) and Postgres's numeric (what the definition is stored in).
// Both hold for the text as written, since that text is what is stored.
func unstorableNumber(n json.Number) string {
	s := string(n)
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return "numbers must fit a 64-bit float (about ±1.8e308)"
		}
		return "not a JSON number"
	}
	mantissa, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := int64(0)
	if hasExp {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || e >= pgMaxExponent || e <= -pgMaxExponent {
			return fmt.Sprintf("the exponent of %s is out of range; write the number without it, or with a smaller one", truncate(s, 40))
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(mantissa, "-"), ".")
	if scale := int64(len(frac)) - exp; scale > pgMaxScale {
		return fmt.Sprintf("numbers may have at most %d digits after the decimal point, counting the ones an exponent adds, and %s has %d: round it (a value this small is 0 to a 64-bit float anyway)",
			pgMaxScale, truncate(s, 40), scale)
	}
	digits := intPart + frac
	if first := strings.IndexFunc(digits, func(r rune) bool { return r != '0' }); first >= 0 {
		if weight := int64(len(intPart)-1-first) + exp; weight > pgMaxWeight {
			return fmt.Sprintf("numbers may have at most %d digits before the decimal point", pgMaxWeight+1)
		}
	}
	return ""
}

func jsonStrings(vals []any) []string {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
			continue
		}
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	return out
}

// topName is the first token of a pointer into params: the param's name.
func topName(ptr string) string {
	if ptr == "" {
		return ""
	}
	tok, _, _ := strings.Cut(ptr[1:], "/")
	return unescapePointer(tok)
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}
