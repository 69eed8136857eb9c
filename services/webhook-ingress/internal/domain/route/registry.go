package route

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Registry holds the routes registered at boot. It is built once and read concurrently.
type Registry struct {
	entries []*Entry
}

// Entry is a registered route with its parsed template and compiled schema.
type Entry struct {
	Route    Route
	Template Template
	Schema   *jsonschema.Schema
}

// Outcome says how a request matched the registry.
type Outcome int

// The outcomes of Match.
const (
	// NoRoute: no route has this path (404 not_found).
	NoRoute Outcome = iota
	// WrongMethod: a route has this path, but for another method (405 method_not_allowed).
	WrongMethod
	// Matched: a route takes this request.
	Matched
)

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Register checks r, compiles its schema and adds it. Two routes of one method whose paths
// could both match one request are refused, so that matching never depends on order.
func (g *Registry) Register(r Route) error {
	if r.Method == "" || strings.ToUpper(r.Method) != r.Method {
		return fmt.Errorf("%w: %s: method must be an upper-case HTTP method", ErrInvalid, r.Path)
	}
	if r.Organization == "" || r.WorkflowName == "" {
		return fmt.Errorf("%w: %s: organization and workflow name are required", ErrInvalid, r.ID())
	}
	if r.FromRequest == nil || r.IdempotencyKey == nil {
		return fmt.Errorf("%w: %s: FromRequest and IdempotencyKey are required", ErrInvalid, r.ID())
	}
	tpl, err := ParseTemplate(r.Path)
	if err != nil {
		return err
	}
	schema, err := CompileSchema(r.InputSchema)
	if err != nil {
		return fmt.Errorf("%w: %s: input schema: %w", ErrInvalid, r.ID(), err)
	}
	for _, e := range g.entries {
		if e.Route.Method == r.Method && e.Template.overlaps(tpl) {
			return fmt.Errorf("%w: %s overlaps %s", ErrInvalid, r.ID(), e.Route.ID())
		}
	}
	g.entries = append(g.entries, &Entry{Route: r, Template: tpl, Schema: schema})
	return nil
}

// CompileSchema compiles a JSON Schema document (draft 2020-12 unless it says otherwise).
func CompileSchema(doc []byte) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, fmt.Errorf("%w: empty schema", ErrInvalid)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("input_schema.json", v); err != nil {
		return nil, err
	}
	return c.Compile("input_schema.json")
}

// Entries lists the registered routes in registration order.
func (g *Registry) Entries() []*Entry { return append([]*Entry(nil), g.entries...) }

// Match finds the route for method and the escaped path under /api/webhooks.
func (g *Registry) Match(method, escapedPath string) (*Entry, map[string]string, Outcome) {
	outcome := NoRoute
	for _, e := range g.entries {
		params, ok := e.Template.Match(escapedPath)
		if !ok {
			continue
		}
		if e.Route.Method == method {
			return e, params, Matched
		}
		outcome = WrongMethod
	}
	return nil, nil, outcome
}
