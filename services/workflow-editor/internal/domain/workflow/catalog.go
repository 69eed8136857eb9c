package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"svc.dev/proto/connectors"
)

// conditionType is the block type whose outgoing edges carry a branch (contract §2).
const conditionType = "condition"

// Catalog is the set of registered block types with their compiled params schemas. It is built
// once from the shared catalog data (svc.dev/proto/connectors) and only read afterwards.
type Catalog struct {
	byType  map[string]*Connector
	types   []string
	entries []connectors.Entry
	printer *message.Printer
	exprs   *exprCache
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
}

type paramInfo struct {
	hidden     bool
	expression bool
}

// NewCatalog compiles entries. A schema that does not compile is an error: the catalog is
// data shipped with the binary, so that is a bug its own test catches first.
func NewCatalog(entries []connectors.Entry) (*Catalog, error) {
	c := &Catalog{byType: map[string]*Connector{}, entries: entries, printer: message.NewPrinter(language.English), exprs: newExprCache()}
	for _, e := range entries {
		conn, err := compileConnector(e)
		if err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", e.Type, err)
		}
		c.byType[e.Type] = conn
		c.types = append(c.types, e.Type)
	}
	return c, nil
}

func compileConnector(e connectors.Entry) (*Connector, error) {
	var schema map[string]any
	if err := json.Unmarshal(e.Params, &schema); err != nil {
		return nil, err
	}
	conn := &Connector{entry: e, params: map[string]paramInfo{}}
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, raw := range props {
			p, _ := raw.(map[string]any)
			info := paramInfo{}
			info.hidden, _ = p["hidden"].(bool)
			info.expression, _ = p["x-expression"].(bool)
			conn.params[name] = info
			if !info.hidden {
				conn.public = append(conn.public, name)
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
	// Round-trip through the validator's own decoder so numbers are json.Number throughout.
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	url := "catalog:///" + e.Type + "/params"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	conn.schema, err = comp.Compile(url)
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
	code    ReasonCode
	name    string // the top-level param concerned
	pointer string // JSON Pointer into params ("/method", "/headers/X")
	rule    string // the JSON Schema keyword broken, for invalid_param
	detail  string
	hint    Hint
}

// checkParams tests params (the block's whole params after the operation) in the order a model
// can best act on: hidden params, then unknown ones, then each value against the schema.
// Templated strings ({{ expr }}) are only checked to be strings where a string is allowed: their
// value is known at run time.
func (c *Catalog) checkParams(k *Connector, params map[string]any, touched []string) *paramViolation {
	for _, name := range touched {
		if info, ok := k.params[name]; ok && info.hidden {
			return &paramViolation{code: ReasonHiddenParam, name: name, pointer: "/" + escapePointer(name)}
		}
	}
	for _, name := range touched {
		if _, ok := k.params[name]; !ok {
			return &paramViolation{code: ReasonUnknownParam, name: name, pointer: "/" + escapePointer(name),
				hint: Hint{DidYouMean: closest(name, k.public), Allowed: k.public}}
		}
	}
	if ptr, ok := findNUL(params, ""); ok {
		return &paramViolation{code: ReasonInvalidParam, name: topName(ptr), pointer: ptr, rule: "string",
			detail: "strings may not contain the NUL character (U+0000)"}
	}
	if ptr, ok := findHugeNumber(params, ""); ok {
		return &paramViolation{code: ReasonInvalidParam, name: topName(ptr), pointer: ptr, rule: "number",
			detail: "numbers must fit a 64-bit float (about ±1.8e308)"}
	}
	if present := presentOf(params, k.exactlyOne); len(present) > 1 {
		return &paramViolation{code: ReasonInvalidParam, name: present[1], pointer: "/" + escapePointer(present[1]), rule: "oneOf",
			detail: fmt.Sprintf("set exactly one of %s, but %s are set", listOf(k.exactlyOne, 10), listOf(present, 10)),
			hint:   Hint{Allowed: k.exactlyOne}}
	}
	err := k.schema.Validate(toSchemaValue(params))
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &paramViolation{code: ReasonInvalidParam, rule: "schema", detail: err.Error()}
	}
	for _, leaf := range leaves(ve) {
		if templatedAt(params, leaf.InstanceLocation) {
			continue
		}
		return c.violationOf(leaf)
	}
	return nil
}

func (c *Catalog) violationOf(leaf *jsonschema.ValidationError) *paramViolation {
	ptr := ""
	for _, tok := range leaf.InstanceLocation {
		ptr += "/" + escapePointer(tok)
	}
	v := &paramViolation{code: ReasonInvalidParam, pointer: ptr, name: topName(ptr),
		rule: strings.Join(leaf.ErrorKind.KeywordPath(), "/"), detail: leaf.ErrorKind.LocalizedString(c.printer)}
	switch k := leaf.ErrorKind.(type) {
	case *kind.Enum:
		v.hint.Allowed = jsonStrings(k.Want)
	case *kind.Const:
		v.hint.Allowed = jsonStrings([]any{k.Want})
	case *kind.Type:
		v.hint.Allowed = append([]string(nil), k.Want...)
	case *kind.DependentRequired:
		v.pointer = ptr + "/" + escapePointer(k.Prop)
		v.hint.Allowed = append([]string(nil), k.Missing...)
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			v.pointer = ptr + "/" + escapePointer(k.Properties[0])
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

// findHugeNumber returns the pointer of the first number outside the float64 range, which
// Postgres cannot be relied on to store and no connector can use.
func findHugeNumber(v any, ptr string) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		_, err := strconv.ParseFloat(string(x), 64)
		return ptr, err != nil
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if found, ok := findHugeNumber(x[k], ptr+"/"+escapePointer(k)); ok {
				return found, true
			}
		}
	case []any:
		for i, e := range x {
			if found, ok := findHugeNumber(e, fmt.Sprintf("%s/%d", ptr, i)); ok {
				return found, true
			}
		}
	}
	return "", false
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
