package connectors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CompileParams compiles a connector's params schema (schema: the entry's Params, decoded and
// adjusted by the caller) as the editor and the orchestrator both apply it: draft 2020-12,
// formats asserted, the catalog's go-duration format known. typ names the schema's resource.
func CompileParams(typ string, schema map[string]any) (*jsonschema.Schema, error) {
	comp := newCompiler()
	comp.RegisterFormat(goDurationFormat())
	return compile(comp, "catalog:///"+typ+"/params", schema)
}

// ValidatorJSON is v as the validator reads JSON: encoded, then decoded by its own decoder, so
// numbers are json.Number throughout (exact, whatever v held).
func ValidatorJSON(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// newCompiler is a compiler as every schema here is compiled with: draft 2020-12 unless the
// schema's $schema says otherwise, formats asserted.
func newCompiler() *jsonschema.Compiler {
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	return comp
}

// compile compiles schema v with comp, as the resource url.
func compile(comp *jsonschema.Compiler, url string, v any) (*jsonschema.Schema, error) {
	doc, err := ValidatorJSON(v)
	if err != nil {
		return nil, err
	}
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	return comp.Compile(url)
}

// goDurationFormat is the catalog's "go-duration" format: a duration Go's time.ParseDuration
// reads ("90s", "1h30m"), which is how the orchestrator reads it. The catalog's pattern says
// the same in JSON Schema, but lets through what does not fit an int64 of nanoseconds
// ("9999999999h").
func goDurationFormat() *jsonschema.Format {
	return &jsonschema.Format{Name: "go-duration", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := time.ParseDuration(s)
		return err
	}}
}

// CompileClientSchema compiles a JSON Schema a client wrote (a param marked x-json-schema), the
// same way wherever it is compiled: draft 2020-12 unless its $schema says otherwise, formats
// asserted, and nothing loaded from outside it (no files of this server, no network): a $ref
// must point inside the schema.
func CompileClientSchema(v any) (*jsonschema.Schema, error) {
	comp := newCompiler()
	comp.UseLoader(refuseLoader{})
	return compile(comp, "client:///schema", v)
}

// refuseLoader loads nothing: a client's schema must hold all it refers to.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema; only references inside it are allowed", url)
}
