// Package openapi holds the public API's OpenAPI 3.1 document, svc.yaml, and reads the list of
// operations out of it, so that tests can hold every service's router and the gateway's
// routing table to what the document promises.
package openapi

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed svc.yaml
var document []byte //nolint:gochecknoglobals // go:embed needs a package-level variable

// Document returns the raw OpenAPI document.
func Document() []byte { return append([]byte(nil), document...) }

// Operation is one method on one path, with the service that serves it and whether it is
// open (no credentials needed).
type Operation struct {
	Method  string
	Path    string
	Service string
	Open    bool
}

func (o Operation) String() string { return o.Method + " " + o.Path }

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch"} //nolint:gochecknoglobals // fixed list

// Operations lists every operation of the document, sorted by path then method.
func Operations() ([]Operation, error) {
	var doc struct {
		Security []map[string][]string           `yaml:"security"`
		Paths    map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(document, &doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var ops []Operation
	for path, item := range doc.Paths {
		for _, m := range methods {
			node, ok := item[m]
			if !ok {
				continue
			}
			var op struct {
				Service  string                 `yaml:"x-service"`
				Security *[]map[string][]string `yaml:"security"`
			}
			if err := node.Decode(&op); err != nil {
				return nil, fmt.Errorf("openapi: %s %s: %w", m, path, err)
			}
			if op.Service == "" {
				return nil, fmt.Errorf("openapi: %s %s has no x-service", m, path)
			}
			open := len(doc.Security) == 0
			if op.Security != nil {
				open = len(*op.Security) == 0
			}
			ops = append(ops, Operation{Method: strings.ToUpper(m), Path: path, Service: op.Service, Open: open})
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Path != ops[j].Path {
			return ops[i].Path < ops[j].Path
		}
		return ops[i].Method < ops[j].Method
	})
	return ops, nil
}

// ForService lists the operations served by service.
func ForService(service string) ([]Operation, error) {
	all, err := Operations()
	if err != nil {
		return nil, err
	}
	var out []Operation
	for _, o := range all {
		if o.Service == service {
			out = append(out, o)
		}
	}
	return out, nil
}

// RoutesOf lists service's operations as "METHOD /path", the form web.Routes gives a router.
func RoutesOf(service string) ([]string, error) {
	ops, err := ForService(service)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.String()
	}
	return out, nil
}
