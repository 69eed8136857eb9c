// Package expression is the expression language of templates and conditions: expr-lang,
// bounded. The workflow editor refuses at edit time what is too big to compile (Check), and
// the engine compiles and runs expressions with Compile and Program.Run, each evaluation
// charged to the Budget of its attempt: loop steps and time, bytes the builtins and operators
// would allocate (checked before they do), and the size of what is produced.
package expression

import (
	"errors"
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// The limits of one expression's program (a condition's expression, or the inside of one
// {{ }}), held at edit time and again when the engine compiles it. Real expressions are a line
// or two, with at most a loop inside a loop.
const (
	// MaxSourceBytes bounds an expression's source.
	MaxSourceBytes = 4096
	// MaxNodes bounds the nodes of its syntax tree.
	MaxNodes = 1000
	// MaxLoopDepth bounds how deep loops (map, filter, reduce, ... closures) nest: the work of
	// nested loops grows as the product of their inputs.
	MaxLoopDepth = 3
)

// ErrTooLarge is a program over the limits above.
var ErrTooLarge = errors.New("expression too large")

// budgetVar is the scope's name of the evaluation's meter. No source can spell it (it is not
// an identifier), so only the calls Compile adds read it.
const budgetVar = "budget$"

// Check parses src and holds it to the limits, without compiling it. It returns nil for a
// source that does not parse (the parser's error is the caller's to report) and an error
// wrapping ErrTooLarge that says which limit src breaks.
func Check(src string) error {
	if len(src) > MaxSourceBytes {
		return fmt.Errorf("%w: an expression may be at most %d bytes, and this one is %d", ErrTooLarge, MaxSourceBytes, len(src))
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil //nolint:nilerr // not this check's to report
	}
	return measure(tree.Node)
}

func measure(n ast.Node) error {
	nodes, depth := shape(n)
	if nodes > MaxNodes {
		return fmt.Errorf("%w: an expression may have at most %d syntax nodes, and this one has %d", ErrTooLarge, MaxNodes, nodes)
	}
	if depth > MaxLoopDepth {
		return fmt.Errorf("%w: loops (map, filter, reduce, ...) may nest at most %d deep, and these nest %d deep", ErrTooLarge, MaxLoopDepth, depth)
	}
	return nil
}

// shape counts the nodes of n and how deep its loops nest.
func shape(n ast.Node) (nodes, depth int) {
	if n == nil {
		return 0, 0
	}
	nodes = 1
	for _, c := range children(n) {
		cn, cd := shape(c)
		nodes += cn
		depth = max(depth, cd)
	}
	if _, ok := n.(*ast.PredicateNode); ok {
		depth++
	}
	return nodes, depth
}

// children are n's direct children, as ast.Walk visits them.
func children(n ast.Node) []ast.Node {
	switch x := n.(type) {
	case *ast.UnaryNode:
		return []ast.Node{x.Node}
	case *ast.BinaryNode:
		return []ast.Node{x.Left, x.Right}
	case *ast.ChainNode:
		return []ast.Node{x.Node}
	case *ast.MemberNode:
		return []ast.Node{x.Node, x.Property}
	case *ast.SliceNode:
		return []ast.Node{x.Node, x.From, x.To}
	case *ast.CallNode:
		return append([]ast.Node{x.Callee}, x.Arguments...)
	case *ast.BuiltinNode:
		return x.Arguments
	case *ast.PredicateNode:
		return []ast.Node{x.Node}
	case *ast.VariableDeclaratorNode:
		return []ast.Node{x.Value, x.Expr}
	case *ast.SequenceNode:
		return x.Nodes
	case *ast.ConditionalNode:
		return []ast.Node{x.Cond, x.Exp1, x.Exp2}
	case *ast.ArrayNode:
		return x.Nodes
	case *ast.MapNode:
		return x.Pairs
	case *ast.PairNode:
		return []ast.Node{x.Key, x.Value}
	}
	return nil
}

// Program is a compiled expression. It is safe for concurrent use.
type Program struct{ p *vm.Program }

// options are Compile's: a map scope whose names may be missing, the loops' step counter,
// and the bounded builtins and operators.
func options() []expr.Option {
	opts := []expr.Option{
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.MaxNodes(MaxNodes),
		expr.Patch(bounder{}),
		expr.Function("tick$", func(p ...any) (any, error) {
			if err := p[0].(*meter).tick(); err != nil {
				return nil, err
			}
			return p[1], nil
		}),
		expr.Function("add$", func(p ...any) (any, error) { return add(p[0].(*meter), p[1], p[2]) }),
		expr.Function("range$", func(p ...any) (any, error) { return makeRange(p[0].(*meter), p[1], p[2]) }),
	}
	for name, cost := range costs {
		impl := implementation(name)
		opts = append(opts, expr.Function(name+"$", func(p ...any) (any, error) {
			m := p[0].(*meter)
			left := int64(-1)
			if m.limits.Bytes > 0 {
				left = m.limits.Bytes - m.alloc
			}
			if err := m.charge(cost(p[1:], left)); err != nil {
				return nil, err
			}
			return impl(p[1:]...)
		}))
	}
	return opts
}

// Compile compiles src into a bounded program: src is held to the limits above, every loop
// body counts a step, and the builtins and operators that allocate in proportion to their
// arguments charge the budget before they allocate.
func Compile(src string) (*Program, error) {
	if len(src) > MaxSourceBytes {
		return nil, fmt.Errorf("%w: an expression may be at most %d bytes, and this one is %d", ErrTooLarge, MaxSourceBytes, len(src))
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, err
	}
	if err := measure(tree.Node); err != nil {
		return nil, err
	}
	p, err := expr.Compile(src, options()...)
	if err != nil {
		return nil, err
	}
	return &Program{p: p}, nil
}

// Run evaluates the program in scope under budget b. The scope holds b's meter while the
// program runs (scope is the caller's, one per attempt).
func (p *Program) Run(scope map[string]any, b *Budget) (any, error) {
	if b.m.err != nil {
		return nil, b.m.err
	}
	scope[budgetVar] = b.m
	out, err := expr.Run(p.p, scope)
	if err != nil {
		if b.m.err != nil {
			return nil, b.m.err // the budget's refusal, not where expr-lang caught it
		}
		if strings.Contains(err.Error(), "memory budget exceeded") {
			return nil, b.m.fail(CodeBudgetExceeded, "expression budget exceeded: %v", err)
		}
		return nil, err
	}
	return out, nil
}

// bounder is the patch Compile applies to the syntax tree: each loop body becomes
// tick$(budget, body), each allocating builtin f(args) becomes f$(budget, args), and the +
// of operands not known to be numbers and every .. become add$ and range$.
type bounder struct{}

func budgetNode() ast.Node { return &ast.IdentifierNode{Value: budgetVar} }

func call(name string, args ...ast.Node) *ast.CallNode {
	return &ast.CallNode{Callee: &ast.IdentifierNode{Value: name}, Arguments: append([]ast.Node{budgetNode()}, args...)}
}

// Visit patches one node; ast.Walk visits a node's children before it.
func (bounder) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.PredicateNode:
		body := n.Node
		c := call("tick$", body)
		c.SetLocation(body.Location())
		n.Node = c
	case *ast.BuiltinNode:
		if _, ok := costs[n.Name]; ok {
			ast.Patch(node, call(n.Name+"$", n.Arguments...))
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "+":
			if !numeric(n.Left) || !numeric(n.Right) {
				ast.Patch(node, call("add$", n.Left, n.Right))
			}
		case "..":
			ast.Patch(node, call("range$", n.Left, n.Right))
		}
	}
}

func numeric(n ast.Node) bool {
	t := n.Type()
	if t == nil {
		return false
	}
	switch t.Kind().String() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return true
	}
	return false
}
