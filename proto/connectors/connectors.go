// Package connectors is the connector catalog as data, and what a connector is to the engine
// that runs it (Runtime, Executor). Each built-in connector is one folder under builtin/: its
// catalog entry (one JSON file per block type, embedded here) beside its executor. The editor
// validates block params against the catalog and lists it publicly; the orchestrator executes
// blocks with the executors, retry policies and timeouts. proto/README.md lists what an entry
// may say beyond JSON Schema; ADR 0007 says why the catalog is JSON.
package connectors

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed builtin/*/*.json
var files embed.FS //nolint:gochecknoglobals // go:embed needs a package-level variable

// Category groups block types in the catalog.
type Category string

// The categories of the public catalog.
const (
	CategoryTrigger Category = "trigger"
	CategoryAction  Category = "action"
	CategoryLogic   Category = "logic"
	CategoryWait    Category = "wait"
)

// rank orders the catalog: triggers first, as a workflow starts with one.
func (c Category) rank() int {
	switch c {
	case CategoryTrigger:
		return 0
	case CategoryAction:
		return 1
	case CategoryLogic:
		return 2
	case CategoryWait:
		return 3
	default:
		return 4
	}
}

// Valid reports whether c is one of the contract's categories.
func (c Category) Valid() bool { return c.rank() < 4 }

// RetryPolicy says how a failed step is retried: attempt n+1 starts
// min(initial_interval_ms * backoff_coefficient^(n-1), max_interval_ms) after attempt n failed,
// up to max_attempts attempts in all.
type RetryPolicy struct {
	MaxAttempts        int     `json:"max_attempts"`
	InitialIntervalMS  int64   `json:"initial_interval_ms"`
	BackoffCoefficient float64 `json:"backoff_coefficient"`
	MaxIntervalMS      int64   `json:"max_interval_ms"`
}

// Entry is one block type. Its JSON form is the contract's catalog entry; Params holds the
// whole params schema, hidden params included (Public drops them).
type Entry struct {
	Type         string          `json:"type"`
	Category     Category        `json:"category"`
	Title        string          `json:"title"`
	Aliases      []string        `json:"aliases,omitempty"`
	Description  string          `json:"description"`
	Params       json.RawMessage `json:"params"`
	OutputSchema json.RawMessage `json:"output_schema"`
	RetryPolicy  RetryPolicy     `json:"retry_policy"`
	TimeoutMS    int64           `json:"timeout_ms"`
}

// Load reads the embedded catalog, triggers first, then by category and type.
func Load() ([]Entry, error) {
	return load(files)
}

func load(fsys fs.FS) ([]Entry, error) {
	names, err := fs.Glob(fsys, "builtin/*/*.json")
	if err != nil {
		return nil, fmt.Errorf("connectors: %w", err)
	}
	entries := make([]Entry, 0, len(names))
	seen := map[string]bool{}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("connectors: %w", err)
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("connectors: %s: %w", name, err)
		}
		if want := e.Type + ".json"; path.Base(name) != want {
			return nil, fmt.Errorf("connectors: %s holds type %q; the file must be named %s", name, e.Type, want)
		}
		if seen[e.Type] {
			return nil, fmt.Errorf("connectors: type %q twice", e.Type)
		}
		seen[e.Type] = true
		entries = append(entries, e)
	}
	sort.SliceStable(entries, func(i, j int) bool {
		if ri, rj := entries[i].Category.rank(), entries[j].Category.rank(); ri != rj {
			return ri < rj
		}
		return entries[i].Type < entries[j].Type
	})
	return entries, nil
}

// MustLoad is Load for composition roots and tests: the catalog is compiled in, so a failure
// is a programmer error that a test already catches.
func MustLoad() []Entry {
	entries, err := Load()
	if err != nil {
		panic(err)
	}
	return entries
}

// HiddenParams lists the names of the params marked hidden, sorted.
func (e Entry) HiddenParams() []string {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(propertiesOf(e.Params), &props); err != nil {
		return nil
	}
	var hidden []string
	for name, raw := range props {
		var mark struct {
			Hidden bool `json:"hidden"`
		}
		if json.Unmarshal(raw, &mark) == nil && mark.Hidden {
			hidden = append(hidden, name)
		}
	}
	sort.Strings(hidden)
	return hidden
}

// Public returns the entry as the public catalog shows it (the members GET /api/connectors documents): hidden
// params are gone from the params schema (from properties and required alike), and so is
// every hidden mark; the type's aliases serve the editor's suggestions and are not listed.
func (e Entry) Public() Entry {
	e.Aliases = nil
	hidden := e.HiddenParams()
	if len(hidden) == 0 {
		return e
	}
	var schema map[string]any
	if err := json.Unmarshal(e.Params, &schema); err != nil {
		return e
	}
	isHidden := map[string]bool{}
	for _, h := range hidden {
		isHidden[h] = true
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		for h := range isHidden {
			delete(props, h)
		}
	}
	if req, ok := schema["required"].([]any); ok {
		kept := make([]any, 0, len(req))
		for _, r := range req {
			if s, _ := r.(string); !isHidden[s] {
				kept = append(kept, r)
			}
		}
		schema["required"] = kept
	}
	out, err := json.Marshal(schema)
	if err != nil {
		return e
	}
	e.Params = out
	return e
}

// propertiesOf returns the raw "properties" member of a schema, or {}.
func propertiesOf(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return json.RawMessage(`{}`)
	}
	return s.Properties
}
