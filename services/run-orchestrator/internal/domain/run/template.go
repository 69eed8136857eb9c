package run

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
)

// Templates evaluates expr-lang expressions and the {{ expr }} templates of params (contract
// §2), bounded (proto/connectors/expression): every evaluation is charged to the budget of
// its attempt. It caches compiled programs by source: runs of one workflow evaluate the same
// expressions again and again, and compiling each once keeps a step's overhead small. The
// cache starts over when it holds maxPrograms entries. Evaluation reads nothing but the scope
// it is given, no I/O; the budget reads the clock, to bound the work, never to decide a value.
type Templates struct {
	limits EvalLimits
	mu     sync.Mutex
	m      map[string]*expression.Program
}

const maxPrograms = 10000

// EvalLimits are the budgets of an attempt's evaluations. Inline is the small one of an
// evaluation inside a transaction or a request (an attempt's params are resolved in the
// step's transaction, and a run of inline blocks is run in its start request): work over it
// is not done there but by the attempt's worker, outside any transaction, under Full.
type EvalLimits struct {
	Inline, Full expression.Limits
}

// The default budgets: inline, 10,000 loop steps, 5 ms and 1 MiB; full, 1 s and 16 MiB
// (SVC_EXPRESSION_TIMEOUT, SVC_EXPRESSION_MAX_BYTES).
const (
	DefaultInlineSteps   = 10000
	DefaultInlineTimeout = 5 * time.Millisecond
	DefaultInlineBytes   = 1 << 20
	DefaultTimeout       = time.Second
	DefaultMaxBytes      = 16 << 20
)

// withDefaults fills the zero fields of l with the defaults.
func (l EvalLimits) withDefaults() EvalLimits {
	if l.Full.Timeout <= 0 {
		l.Full.Timeout = DefaultTimeout
	}
	if l.Full.Bytes <= 0 {
		l.Full.Bytes = DefaultMaxBytes
	}
	if l.Inline.Steps <= 0 {
		l.Inline.Steps = DefaultInlineSteps
	}
	if l.Inline.Timeout <= 0 {
		l.Inline.Timeout = min(DefaultInlineTimeout, l.Full.Timeout)
	}
	if l.Inline.Bytes <= 0 {
		l.Inline.Bytes = min(DefaultInlineBytes, l.Full.Bytes)
	}
	l.Inline.Inline, l.Full.Inline = true, false
	return l
}

// NewTemplates returns an empty cache evaluating under limits (zero fields: the defaults).
func NewTemplates(limits EvalLimits) *Templates {
	return &Templates{limits: limits.withDefaults(), m: map[string]*expression.Program{}}
}

// Limits are the budgets the templates evaluate under.
func (p *Templates) Limits() EvalLimits { return p.limits }

// Eval evaluates the expression src against scope, charged to b.
func (p *Templates) Eval(src string, scope map[string]any, b *expression.Budget) (any, error) {
	p.mu.Lock()
	prog, ok := p.m[src]
	p.mu.Unlock()
	if !ok {
		var err error
		prog, err = expression.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", shorten(src), err)
		}
		p.mu.Lock()
		if len(p.m) >= maxPrograms {
			p.m = map[string]*expression.Program{}
		}
		p.m[src] = prog
		p.mu.Unlock()
	}
	out, err := prog.Run(scope, b)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", shorten(src), err)
	}
	return out, nil
}

// shorten keeps an error message about an expression short.
func shorten(src string) string {
	if len(src) <= 120 {
		return src
	}
	return src[:117] + "..."
}

// Resolve evaluates the {{ expr }} templates in v: a string that is exactly one
// template takes the value's JSON type; other strings get each value interpolated (strings as
// they are, anything else as JSON). Objects and arrays are resolved member by member.
// The size of what is produced is charged to b too (a param that is a reference to a large
// value costs nothing to evaluate, but its copy is written with the attempt).
func (p *Templates) Resolve(v any, scope map[string]any, b *expression.Budget) (any, error) {
	switch x := v.(type) {
	case string:
		return p.resolveString(x, scope, b)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, m := range x {
			r, err := p.Resolve(m, scope, b)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			r, err := p.Resolve(m, scope, b)
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

func (p *Templates) resolveString(s string, scope map[string]any, b *expression.Budget) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	trimmed := strings.TrimSpace(s)
	if strings.HasPrefix(trimmed, "{{") && strings.HasSuffix(trimmed, "}}") && strings.Count(trimmed, "{{") == 1 {
		val, err := p.Eval(strings.TrimSpace(trimmed[2:len(trimmed)-2]), scope, b)
		if err != nil {
			return nil, err
		}
		if err := b.OutputOf(val); err != nil {
			return nil, err
		}
		return val, nil
	}
	segs, err := connectors.SplitTemplate(s)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for _, seg := range segs {
		if !seg.Expr {
			out.WriteString(seg.Text)
			continue
		}
		val, err := p.Eval(seg.Text, scope, b)
		if err != nil {
			return nil, err
		}
		piece, ok := val.(string)
		if !ok {
			raw, err := b.Marshal(val)
			if err != nil {
				if expression.AsLimit(err) != nil {
					return nil, err
				}
				return nil, fmt.Errorf("template value: %w", err)
			}
			piece = string(raw)
		}
		if err := b.Output(int64(len(piece))); err != nil {
			return nil, err
		}
		out.WriteString(piece)
	}
	if err := b.Output(int64(len(s))); err != nil { // the text between the templates
		return nil, err
	}
	return out.String(), nil
}
