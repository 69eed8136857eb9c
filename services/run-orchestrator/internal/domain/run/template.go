package run

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"svc.dev/proto/connectors"
)

// Templates evaluates expr-lang expressions and the {{ expr }} templates of params (contract
// §2). It caches compiled programs by source: runs of one workflow evaluate the same
// expressions again and again, and compiling each once keeps a step's overhead small. The
// cache starts over when it holds maxPrograms entries. Evaluation reads nothing but the scope
// it is given: no clock, no I/O.
type Templates struct {
	mu sync.Mutex
	m  map[string]*vm.Program
}

const maxPrograms = 10000

// NewTemplates returns an empty cache.
func NewTemplates() *Templates { return &Templates{m: map[string]*vm.Program{}} }

// Eval evaluates the expression src against scope.
func (p *Templates) Eval(src string, scope map[string]any) (any, error) {
	p.mu.Lock()
	prog, ok := p.m[src]
	p.mu.Unlock()
	if !ok {
		var err error
		prog, err = expr.Compile(src, expr.AllowUndefinedVariables())
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", src, err)
		}
		p.mu.Lock()
		if len(p.m) >= maxPrograms {
			p.m = map[string]*vm.Program{}
		}
		p.m[src] = prog
		p.mu.Unlock()
	}
	out, err := expr.Run(prog, scope)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", src, err)
	}
	return out, nil
}

// Resolve evaluates the {{ expr }} templates in v (contract §2): a string that is exactly one
// template takes the value's JSON type; other strings get each value interpolated (strings as
// they are, anything else as JSON). Objects and arrays are resolved member by member.
func (p *Templates) Resolve(v any, scope map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		return p.resolveString(x, scope)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, m := range x {
			r, err := p.Resolve(m, scope)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			r, err := p.Resolve(m, scope)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

func (p *Templates) resolveString(s string, scope map[string]any) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	trimmed := strings.TrimSpace(s)
	if strings.HasPrefix(trimmed, "{{") && strings.HasSuffix(trimmed, "}}") && strings.Count(trimmed, "{{") == 1 {
		return p.Eval(strings.TrimSpace(trimmed[2:len(trimmed)-2]), scope)
	}
	segs, err := connectors.SplitTemplate(s)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, seg := range segs {
		if !seg.Expr {
			b.WriteString(seg.Text)
			continue
		}
		val, err := p.Eval(seg.Text, scope)
		if err != nil {
			return nil, err
		}
		if str, ok := val.(string); ok {
			b.WriteString(str)
		} else {
			raw, err := json.Marshal(val)
			if err != nil {
				return nil, fmt.Errorf("template value: %w", err)
			}
			b.Write(raw)
		}
	}
	return b.String(), nil
}
