package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"svc.dev/proto/connectors"
)

// programs caches compiled expr-lang programs by source. Runs of one workflow evaluate the
// same expressions again and again; compiling each once keeps a step's overhead small. The
// cache starts over when it holds maxPrograms entries.
type programs struct {
	mu sync.Mutex
	m  map[string]*vm.Program
}

const maxPrograms = 10000

func newPrograms() *programs { return &programs{m: map[string]*vm.Program{}} }

// eval evaluates src against scope.
func (p *programs) eval(src string, scope map[string]any) (any, error) {
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

// resolve evaluates the {{ expr }} templates in v (contract §2): a string that is exactly one
// template takes the value's JSON type; other strings get each value interpolated (strings as
// they are, anything else as JSON). Objects and arrays are resolved member by member.
func (p *programs) resolve(v any, scope map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		return p.resolveString(x, scope)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, m := range x {
			r, err := p.resolve(m, scope)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			r, err := p.resolve(m, scope)
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

func (p *programs) resolveString(s string, scope map[string]any) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	trimmed := strings.TrimSpace(s)
	if strings.HasPrefix(trimmed, "{{") && strings.HasSuffix(trimmed, "}}") && strings.Count(trimmed, "{{") == 1 {
		return p.eval(strings.TrimSpace(trimmed[2:len(trimmed)-2]), scope)
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
		val, err := p.eval(seg.Text, scope)
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
