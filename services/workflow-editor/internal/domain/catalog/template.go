package catalog

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
	"svc.dev/services/workflow-editor/internal/domain/repair"
)

// The names a template or an expression can use (docs/API.md).
const (
	scopeInput    = "input"
	scopeSteps    = "steps"
	scopeRun      = "run"
	scopeWorkflow = "workflow"
)

func scopeRoots() []string { return []string{scopeInput, scopeSteps, scopeRun, scopeWorkflow} }

// hasTemplate reports whether s holds a template opening.
func hasTemplate(s string) bool { return strings.Contains(s, "{{") }

// splitTemplates returns the expressions of the {{ expr }} templates in s, in order (those
// before an unclosed "{{" too, with the error).
func splitTemplates(s string) ([]string, error) {
	segs, err := connectors.SplitTemplate(s)
	var exprs []string
	for _, seg := range segs {
		if seg.Expr {
			exprs = append(exprs, seg.Text)
		}
	}
	return exprs, err
}

// stripTemplates rewrites s with each {{ expr }} replaced by expr: what a model that wrapped
// a bare expression in a template meant. ok is false when a {{ is not closed.
func stripTemplates(s string) (string, bool) {
	segs, err := connectors.SplitTemplate(s)
	if err != nil {
		return "", false
	}
	var out strings.Builder
	for _, seg := range segs {
		out.WriteString(seg.Text)
	}
	return strings.TrimSpace(out.String()), true
}

// reference is one name an expression uses from its scope, or one function it calls.
type reference struct {
	// text is the reference as written, like "steps.fetch.output" or "inptu".
	text string
	// step is the block id of a steps.<id> reference, else "".
	step string
	// problem says why the reference cannot resolve whatever the graph; "" when it may.
	problem    string
	didYouMean string
	// call marks a call of a function that does not exist: the expression cannot run at all
	// (invalid_expression), rather than refer to something missing (unknown_reference).
	call bool
}

type refVisitor struct {
	refs    []reference
	callees map[string]bool // names called as functions
	locals  map[string]bool
	calls   map[string]bool // unknown functions already reported
}

// Visit records member references at once; bare identifiers are judged in finish, when the
// whole tree has shown which names are callees or let-bound locals.
func (v *refVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.CallNode:
		v.call(n)
	case *ast.VariableDeclaratorNode:
		v.locals[n.Name] = true
	case *ast.MemberNode:
		v.member(n)
	case *ast.IdentifierNode:
		v.refs = append(v.refs, reference{text: n.Value, problem: "ident"})
	}
}

// call records a call of a function the run will not have. The parser makes a call of one of
// expr-lang's builtins a BuiltinNode, so a CallNode is either an unknown name or a method of a
// value; the values of a run are JSON data, which has no methods.
func (v *refVisitor) call(n *ast.CallNode) {
	name := ""
	switch c := n.Callee.(type) {
	case *ast.IdentifierNode:
		name = c.Value
		v.callees[name] = true
	case *ast.MemberNode:
		if prop, ok := c.Property.(*ast.StringNode); ok {
			name = prop.Value
		}
	}
	if v.calls[name] {
		return
	}
	v.calls[name] = true
	if _, ok := builtin.Index[name]; ok && name != "" {
		if _, isIdent := n.Callee.(*ast.IdentifierNode); isIdent {
			return // only when the parser is configured to leave builtins as calls
		}
	}
	dym := repair.Closest(name, builtin.Names)
	if name == "" {
		name = "(the called value)"
	}
	msg := fmt.Sprintf("%s() is not a function an expression can call: the functions are expr-lang's builtins (such as len, upper, lower, trim, split, join, filter, map, now, duration, toJSON; see https://expr-lang.org/docs/language-definition).", name)
	if _, isMember := n.Callee.(*ast.MemberNode); isMember {
		msg = fmt.Sprintf("%s() is called as a method, but the values of a run are JSON data, which has no methods: call one of expr-lang's builtins with the value as its argument, like upper(input.name).", name)
	}
	if dym != "" {
		msg += fmt.Sprintf(" Did you mean %s()?", dym)
	}
	v.refs = append(v.refs, reference{text: name + "()", problem: msg, didYouMean: dym, call: true})
}

// member records steps.<id>, steps.<id>.output, run.<x> and workflow.<x> references.
func (v *refVisitor) member(n *ast.MemberNode) {
	root, ok := n.Node.(*ast.IdentifierNode)
	if ok {
		prop, isStr := n.Property.(*ast.StringNode)
		switch root.Value {
		case scopeSteps:
			if isStr {
				v.refs = append(v.refs, reference{text: "steps." + prop.Value, step: prop.Value})
			}
		case scopeRun:
			if isStr && prop.Value != "id" {
				v.refs = append(v.refs, reference{text: "run." + prop.Value, problem: "run has only id: use run.id.", didYouMean: "run.id"})
			}
		case scopeWorkflow:
			if isStr && prop.Value != "id" {
				v.refs = append(v.refs, reference{text: "workflow." + prop.Value, problem: "workflow has only id: use workflow.id.", didYouMean: "workflow.id"})
			}
		}
		return
	}
	// steps.<id>.<x>: only output is there.
	inner, ok := n.Node.(*ast.MemberNode)
	if !ok {
		return
	}
	root, ok = inner.Node.(*ast.IdentifierNode)
	if !ok || root.Value != scopeSteps {
		return
	}
	id, ok1 := inner.Property.(*ast.StringNode)
	prop, ok2 := n.Property.(*ast.StringNode)
	if ok1 && ok2 && prop.Value != "output" {
		text := "steps." + id.Value + "." + prop.Value
		v.refs = append(v.refs, reference{text: text, problem: fmt.Sprintf("a step has only output: use steps.%s.output.%s.", id.Value, prop.Value),
			didYouMean: "steps." + id.Value + ".output"})
	}
}

// finish judges the bare identifiers now that callees and locals are known.
func (v *refVisitor) finish() []reference {
	out := v.refs[:0]
	for _, r := range v.refs {
		if r.problem != "ident" {
			out = append(out, r)
			continue
		}
		name := r.text
		if isRoot(name) || v.locals[name] || v.callees[name] || name == "$env" {
			continue
		}
		if _, ok := builtin.Index[name]; ok {
			continue
		}
		dym := repair.Closest(name, scopeRoots())
		out = append(out, reference{text: name,
			problem:    fmt.Sprintf("%q is not in scope: templates can use input, steps.<block_id>.output, run.id and workflow.id.", name),
			didYouMean: dym})
	}
	return out
}

func isRoot(name string) bool {
	for _, r := range scopeRoots() {
		if r == name {
			return true
		}
	}
	return false
}

// exprCache remembers what each expression source parsed to. Validation runs on every write
// of a workflow (and on a read of a version not validated yet), and a large workflow's
// expressions rarely change between two, so parsing each only once keeps a thousand-block
// patch cheap. The cache is bounded: it starts over when full.
type exprCache struct {
	mu      sync.Mutex
	entries map[string]parsed
	conf    *conf.Config // read-only once built; the parser never writes it
	parses  int          // how many sources were parsed, for tests
}

type parsed struct {
	refs []reference
	err  error
	// tooLarge is why the engine would refuse the source (expression.Check), or nil.
	tooLarge error
}

// The cache holds at most maxCachedExprs sources of at most maxCachedExprLen bytes each: every
// expression a patch may write fits (MaxExpressionLength); only one stored before that limit
// may not.
const (
	maxCachedExprs   = 20000
	maxCachedExprLen = MaxExpressionLength
)

func newExprCache() *exprCache {
	return &exprCache{entries: map[string]parsed{}, conf: conf.CreateNew()}
}

// references parses src and returns its judged references.
func (c *exprCache) references(src string) ([]reference, error) {
	p := c.get(src)
	return p.refs, p.err
}

// limits says why the engine would refuse src as too large (expression.Check), or nil.
func (c *exprCache) limits(src string) error { return c.get(src).tooLarge }

func (c *exprCache) get(src string) parsed {
	c.mu.Lock()
	p, ok := c.entries[src]
	c.mu.Unlock()
	if ok {
		return p
	}
	refs, err := references(src, c.conf)
	p = parsed{refs: refs, err: err}
	if err == nil {
		p.tooLarge = expression.Check(src)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parses++
	if len(src) > maxCachedExprLen {
		return p
	}
	if len(c.entries) >= maxCachedExprs {
		c.entries = map[string]parsed{}
	}
	c.entries[src] = p
	return p
}

// references parses src and returns its judged references.
func references(src string, cfg *conf.Config) ([]reference, error) {
	tree, err := parseTree(src, cfg)
	if err != nil {
		return nil, err
	}
	v := &refVisitor{callees: map[string]bool{}, locals: map[string]bool{}, calls: map[string]bool{}}
	ast.Walk(&tree.Node, v)
	return v.finish(), nil
}

func parseTree(src string, cfg *conf.Config) (*parser.Tree, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("the expression is empty")
	}
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%s (at column %d)", fe.Message, fe.Column+1)
		}
		return nil, err
	}
	return tree, nil
}
