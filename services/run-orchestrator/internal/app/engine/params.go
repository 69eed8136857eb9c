package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"svc.dev/proto/connectors"
)

// The editor checks a block's params against its connector's schema when the workflow is
// saved, but it cannot check a value that is a template: `method: "{{ 'TRACE' }}"` is only
// known once the run resolves it, and `timeout_ms: "{{ 604800000 }}"` would hold a shared
// worker for a week. So every attempt's resolved params pass the catalog's params schema
// here, before the executor runs and before any side effect.

// ParamsValidator checks an attempt's resolved params against its connector's params schema.
// Each catalog schema is compiled once, when the validator is built.
type ParamsValidator struct {
	schemas map[string]*jsonschema.Schema
	// texts is, per block type, its params the schema types as strings: each one (whole), or
	// each member of one (members: headers, query).
	texts map[string]map[string]textParam
	// ceilings is, per block type, the most time an attempt may take: the catalog's maximum
	// of its timeout_ms param, or its timeout_ms when it has no such param.
	ceilings map[string]time.Duration
	printer  *message.Printer
}

// NewParamsValidator compiles the params schema of every catalog entry. A schema that does not
// compile is a programmer error in the catalog, reported here at start-up.
//
// Params kept raw (x-json-schema: trigger.manual's input_schema) are not templated, so the
// editor's check at save time still holds for them; their schema (the draft 2020-12
// meta-schema) is costly to apply and is left out here. x-expression params stay raw as well
// but are strings whose check costs nothing, so they keep theirs. Hidden params the server
// adds (allow_private_network) are in the schema and pass it.
func NewParamsValidator(catalog []connectors.Entry) (*ParamsValidator, error) {
	v := &ParamsValidator{schemas: make(map[string]*jsonschema.Schema, len(catalog)), texts: make(map[string]map[string]textParam, len(catalog)),
		ceilings: make(map[string]time.Duration, len(catalog)), printer: message.NewPrinter(language.English)}
	for _, e := range catalog {
		sch, ceiling, err := compileParams(e)
		if err != nil {
			return nil, fmt.Errorf("params schema of %s: %w", e.Type, err)
		}
		v.schemas[e.Type], v.ceilings[e.Type], v.texts[e.Type] = sch, ceiling, textParams(e)
	}
	return v, nil
}

func compileParams(e connectors.Entry) (*jsonschema.Schema, time.Duration, error) {
	var schema map[string]any
	if err := json.Unmarshal(e.Params, &schema); err != nil {
		return nil, 0, err
	}
	ceiling := time.Duration(e.TimeoutMS) * time.Millisecond
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, p := range props {
			prop, _ := p.(map[string]any)
			if raw, _ := prop["x-json-schema"].(bool); raw {
				props[name] = true
			}
		}
		if t, ok := props["timeout_ms"].(map[string]any); ok {
			if maxMS, ok := t["maximum"].(float64); ok && maxMS > 0 {
				ceiling = time.Duration(maxMS) * time.Millisecond
			}
		}
	}
	sch, err := connectors.CompileParams(e.Type, schema)
	return sch, ceiling, err
}

// Check checks params, as resolved for an attempt of a block of type typ, and returns them as
// the executor gets them. A *ParamError names the first value that breaks the schema. A type
// the catalog does not know passes (the engine then finds no executor for it).
//
// A template that is a whole param keeps its value's type (the orchestrator README,
// "Templates"), and connectors have always taken a number or an object where the schema says
// string (a log message "{{ steps.call.output.status }}", a header "{{ input.n }}"). Such a
// value is given as its JSON text, as a template inside a longer string is; params is not
// changed (the attempt's row keeps the resolved values), a copy is returned.
func (v *ParamsValidator) Check(typ string, params map[string]any) (map[string]any, error) {
	sch, ok := v.schemas[typ]
	if !ok {
		return params, nil
	}
	params = asText(params, v.texts[typ])
	if sch.Validate(params) == nil {
		return params, nil
	}
	return params, v.explain(typ, sch, params)
}

// explain is the *ParamError of params that failed the check, or nil when they pass in JSON
// form.
func (v *ParamsValidator) explain(typ string, sch *jsonschema.Schema, params map[string]any) error {
	// Templates may yield values of Go types the validator does not read ([]int from 1..3, an
	// int64): they are checked again in their JSON form. Only a failure pays for this.
	norm, nerr := connectors.ValidatorJSON(params)
	if nerr != nil {
		return &ParamError{Type: typ, Pointer: "", Rule: "json", Detail: "the resolved params are not JSON: " + nerr.Error()}
	}
	err := sch.Validate(norm)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ParamError{Type: typ, Rule: "schema", Detail: err.Error()}
	}
	return v.paramError(typ, deepest(ve))
}

// Bound returns timeout capped at the most time an attempt of a block of type typ may take:
// the catalog's maximum of its timeout_ms param (or its timeout_ms). Executors never trust a
// timeout above it, whatever let it through.
func (v *ParamsValidator) Bound(typ string, timeout time.Duration) time.Duration {
	if c := v.ceilings[typ]; c > 0 && (timeout > c || timeout <= 0) {
		return c
	}
	return timeout
}

// textParam says how a param the schema types as a string is found: the param itself, or
// every member of it (an object of strings).
type textParam int

const (
	textWhole textParam = iota + 1
	textMembers
)

// textParams finds the params that hold text: {"type":"string"}, or an object whose
// additionalProperties is {"type":"string"}.
func textParams(e connectors.Entry) map[string]textParam {
	var s struct {
		Properties map[string]struct {
			Type       any `json:"type"`
			Additional *struct {
				Type any `json:"type"`
			} `json:"additionalProperties"`
		} `json:"properties"`
	}
	out := map[string]textParam{}
	if json.Unmarshal(e.Params, &s) != nil {
		return out
	}
	for name, p := range s.Properties {
		switch {
		case p.Type == "string":
			out[name] = textWhole
		case p.Type == "object" && p.Additional != nil && p.Additional.Type == "string":
			out[name] = textMembers
		}
	}
	return out
}

// asText gives the values of params' text params that are not strings as their JSON text,
// in a copy (params itself when there is none).
func asText(params map[string]any, texts map[string]textParam) map[string]any {
	out, copied := params, false
	set := func(name string, val any) {
		if !copied {
			out, copied = maps.Clone(params), true
		}
		out[name] = val
	}
	for name, how := range texts {
		val, ok := params[name]
		if !ok {
			continue
		}
		switch how {
		case textWhole:
			if t, changed := jsonText(val); changed {
				set(name, t)
			}
		case textMembers:
			m, _ := val.(map[string]any)
			var members map[string]any
			for k, x := range m {
				if t, changed := jsonText(x); changed {
					if members == nil {
						members = maps.Clone(m)
					}
					members[k] = t
				}
			}
			if members != nil {
				set(name, members)
			}
		}
	}
	return out
}

// jsonText is v's JSON text when v is not a string (and is JSON).
func jsonText(v any) (string, bool) {
	if _, ok := v.(string); ok {
		return "", false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// deepest is the most specific failure in the tree: the leaf at the deepest value, the first
// of those.
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := e
	var walk func(*jsonschema.ValidationError)
	walk = func(n *jsonschema.ValidationError) {
		if len(n.Causes) == 0 {
			if len(best.Causes) > 0 || len(n.InstanceLocation) > len(best.InstanceLocation) {
				best = n
			}
			return
		}
		for _, c := range n.Causes {
			walk(c)
		}
	}
	walk(e)
	return best
}

func (v *ParamsValidator) paramError(typ string, leaf *jsonschema.ValidationError) *ParamError {
	pe := &ParamError{Type: typ, Pointer: pointer(leaf.InstanceLocation),
		Rule: strings.Join(leaf.ErrorKind.KeywordPath(), "/"), Detail: leaf.ErrorKind.LocalizedString(v.printer)}
	switch k := leaf.ErrorKind.(type) {
	case *kind.Enum:
		pe.Allowed, pe.Detail = k.Want, shown(k.Got)+" is not one of the allowed values"
	case *kind.Const:
		pe.Allowed, pe.Detail = []any{k.Want}, shown(k.Got)+" is not the allowed value"
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			pe.Pointer += "/" + escapePointer(k.Properties[0])
		}
	case *kind.Required:
		if len(k.Missing) > 0 {
			pe.Pointer += "/" + escapePointer(k.Missing[0])
		}
	}
	return pe
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteString("/")
		b.WriteString(escapePointer(tok))
	}
	return b.String()
}

func escapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// ParamError is an attempt's resolved params breaking its connector's schema. The values come
// from the run's input and earlier steps' outputs, which a retry of the attempt does not
// change: the engine fails the block at once (code invalid_param), without retries.
type ParamError struct {
	Type string
	// Pointer is the JSON Pointer of the value in the params ("/method"); empty for the
	// params as a whole.
	Pointer string
	// Rule is the schema keyword broken ("enum", "maximum", "type", "pattern").
	Rule string
	// Detail is the validator's account of it; Allowed lists the values an enum or const allows.
	Detail  string
	Allowed []any
}

// maxShown bounds the bytes of allowed values an error message quotes.
const maxShown = 512

// shown is v's JSON form for a message, cut at maxShown bytes.
func shown(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(raw) > maxShown {
		return string(raw[:maxShown]) + "…"
	}
	return string(raw)
}

func (e *ParamError) Error() string {
	where := "params"
	if e.Pointer != "" {
		where = "param " + e.Pointer
	}
	msg := fmt.Sprintf("%s of %s, as resolved, breaks the connector's schema (%s): %s", where, e.Type, e.Rule, e.Detail)
	if len(e.Allowed) > 0 {
		msg += "; allowed: " + shown(e.Allowed)
	}
	return msg
}
