package check

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Root finds the repository root (the directory that holds go.work) from dir upwards.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// Services lists the services of the repository: every services/<name> with a
// cmd/<name>/main.go. The code is the list; the manifests are held to it.
func Services(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "services"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "services", e.Name(), "cmd", e.Name(), "main.go")); err == nil {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no services/<name>/cmd/<name>/main.go under %s", root)
	}
	sort.Strings(names)
	return names, nil
}

// Needs is what a service says it needs of the stores (its boot.Needs literal).
type Needs struct{ Postgres, Redis bool }

// StoreNeeds reads the boot.Needs{...} literal in services/<svc>/internal/service, the
// composition root: what the service opens at start-up, hence the store URLs it must be
// given.
func StoreNeeds(root, svc string) (Needs, error) {
	dir := filepath.Join(root, "services", svc, "internal", "service")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Needs{}, err
	}
	var (
		n     Needs
		found bool
	)
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return Needs{}, err
		}
		ast.Inspect(f, func(node ast.Node) bool {
			lit, ok := node.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Needs" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "boot" {
				return true
			}
			found = true
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				val, _ := kv.Value.(*ast.Ident)
				if key == nil || val == nil {
					continue
				}
				switch key.Name {
				case "Postgres":
					n.Postgres = n.Postgres || val.Name == "true"
				case "Redis":
					n.Redis = n.Redis || val.Name == "true"
				}
			}
			return true
		})
	}
	if !found {
		return Needs{}, fmt.Errorf("%s: no boot.Needs{...} literal", dir)
	}
	return n, nil
}
