package fuzz

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// operation is one method of one path of the OpenAPI document, its $refs resolved.
type operation struct {
	ID      string
	Method  string
	Path    string // the template, /api/workflows/{id}
	Service string // x-service
	Open    bool   // security: [] (no credentials needed)
	Params  []param
	// Body is the JSON Schema of the application/json request body, nil without one.
	Body         map[string]any
	BodyRequired bool
	// Responses maps a status ("200") to the JSON Schema of its application/json body (nil
	// when the document gives no body).
	Responses map[string]map[string]any
}

// param is a path, query or header parameter.
type param struct {
	Name     string
	In       string
	Required bool
	Schema   map[string]any
}

// auth reports whether the operation is in the auth layer, whose errors are {code, message}.
func (o *operation) auth() bool { return strings.HasPrefix(o.Path, "/api/auth/") }

// mutating reports whether the method may change state.
func (o *operation) mutating() bool { return o.Method != http.MethodGet && o.Method != http.MethodHead }

func (o *operation) param(in string) []param {
	var out []param
	for _, p := range o.Params {
		if p.In == in {
			out = append(out, p)
		}
	}
	return out
}

// spec is the parsed document.
type spec struct {
	root map[string]any
	Ops  []*operation
	// Paths maps each path template to the methods the document gives it.
	Paths map[string][]string
}

// loadSpec reads the OpenAPI document of the repository this test runs in.
func loadSpec() (*spec, error) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "proto", "openapi", "svc.yaml"))
	if err != nil {
		return nil, err
	}
	var root map[string]any
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("parse svc.yaml: %w", err)
	}
	s := &spec{root: root, Paths: map[string][]string{}}
	paths, _ := root["paths"].(map[string]any)
	if len(paths) == 0 {
		return nil, fmt.Errorf("svc.yaml has no paths")
	}
	for path, pv := range paths {
		item, _ := pv.(map[string]any)
		var shared []any
		if ps, ok := item["parameters"].([]any); ok {
			shared = ps
		}
		for method, ov := range item {
			m := strings.ToUpper(method)
			switch m {
			case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			default:
				continue
			}
			o, _ := ov.(map[string]any)
			op := &operation{Method: m, Path: path, Responses: map[string]map[string]any{}}
			op.ID, _ = o["operationId"].(string)
			op.Service, _ = o["x-service"].(string)
			if sec, ok := o["security"].([]any); ok && len(sec) == 0 {
				op.Open = true
			}
			var ps []any
			ps = append(ps, shared...)
			if own, ok := o["parameters"].([]any); ok {
				ps = append(ps, own...)
			}
			for _, p := range ps {
				pm := s.resolve(p)
				sch := s.resolve(pm["schema"])
				req, _ := pm["required"].(bool)
				name, _ := pm["name"].(string)
				in, _ := pm["in"].(string)
				op.Params = append(op.Params, param{Name: name, In: in, Required: req || in == "path", Schema: s.deref(sch)})
			}
			if rb, ok := o["requestBody"]; ok {
				rbm := s.resolve(rb)
				op.BodyRequired, _ = rbm["required"].(bool)
				op.Body = s.deref(jsonSchemaOf(s.resolve(rbm["content"])))
				if op.Body == nil {
					op.Body = map[string]any{}
				}
			}
			if rs, ok := o["responses"].(map[string]any); ok {
				for code, rv := range rs {
					op.Responses[code] = s.deref(jsonSchemaOf(s.resolve(s.resolve(rv)["content"])))
				}
			}
			s.Ops = append(s.Ops, op)
			s.Paths[path] = append(s.Paths[path], m)
		}
	}
	sort.Slice(s.Ops, func(i, j int) bool {
		if s.Ops[i].Path != s.Ops[j].Path {
			return s.Ops[i].Path < s.Ops[j].Path
		}
		return s.Ops[i].Method < s.Ops[j].Method
	})
	return s, nil
}

func jsonSchemaOf(content any) map[string]any {
	c, _ := content.(map[string]any)
	j, _ := c["application/json"].(map[string]any)
	sch, _ := j["schema"].(map[string]any)
	return sch
}

// resolve follows one $ref (and chains of them) to the node it names.
func (s *spec) resolve(v any) map[string]any {
	m, _ := v.(map[string]any)
	for i := 0; m != nil && i < 20; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m = s.lookup(ref)
	}
	return m
}

func (s *spec) lookup(ref string) map[string]any {
	var cur any = s.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cm, _ := cur.(map[string]any)
		cur = cm[part]
	}
	m, _ := cur.(map[string]any)
	return m
}

// deref returns the schema with every $ref inside it replaced by its target (the document
// has no recursive schemas; a depth bound keeps a future one from looping).
func (s *spec) deref(sch map[string]any) map[string]any {
	if sch == nil {
		return nil
	}
	out, _ := s.derefAny(sch, 0).(map[string]any)
	return out
}

func (s *spec) derefAny(v any, depth int) any {
	if depth > 30 {
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok {
			return s.derefAny(s.lookup(ref), depth+1)
		}
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = s.derefAny(x, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = s.derefAny(x, depth+1)
		}
		return out
	default:
		return v
	}
}
