package catalog

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// Templates evaluated before any step ran. A param (at any depth) marked
// "x-template-scope": [roots] in the catalog is evaluated by the engine over those roots only:
// a trigger's concurrency key is evaluated at the run's start, when only its input exists.
// A template there that names another root (steps.<id>.output, run.id, workflow.id) could
// never resolve, so the operation that sets it is skipped at once (invalid_param), rather than
// saved and failing every start.

// scopedParam is a param position whose templates may use only roots.
type scopedParam struct {
	loc   []string // inside params: ["concurrency", "key"]
	roots []string
}

// scopedParams lists the positions marked "x-template-scope" under the properties of a
// params schema, loc being the path to schema.
func scopedParams(schema map[string]any, loc []string) []scopedParam {
	var out []scopedParam
	if roots, ok := schema["x-template-scope"].([]any); ok {
		sp := scopedParam{loc: slices.Clone(loc)}
		for _, r := range roots {
			if s, ok := r.(string); ok {
				sp.roots = append(sp.roots, s)
			}
		}
		out = append(out, sp)
	}
	props, _ := schema["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		if p, ok := props[name].(map[string]any); ok {
			out = append(out, scopedParams(p, append(loc, name))...)
		}
	}
	return out
}

// stepOutputRef matches steps.<id>.output.<path>, whose path is often what the input holds.
var stepOutputRef = regexp.MustCompile(`steps\.[A-Za-z0-9_-]+\.output\.`) //nolint:gochecknoglobals // a constant pattern

// checkTemplateScopes refuses a template, at a scoped position of the params the operation
// sent, that names a root outside the position's scope.
func (c *Catalog) checkTemplateScopes(k *Connector, params map[string]any, touched []string) *paramViolation {
	for _, sp := range k.scoped {
		if !slices.Contains(touched, sp.loc[0]) {
			continue
		}
		v, ok := valueAt(params, sp.loc)
		s, isStr := v.(string)
		if !ok || !isStr || !hasTemplate(s) {
			continue
		}
		exprs, _ := splitTemplates(s) // an unclosed {{ is a validation error of its own
		for _, e := range exprs {
			bad := c.outOfScope(e, sp.roots)
			if bad == "" {
				continue
			}
			ptr := ""
			for _, tok := range sp.loc {
				ptr += "/" + escapePointer(tok)
			}
			viol := &paramViolation{code: workflow.ReasonInvalidParam, name: sp.loc[0], pointer: ptr, rule: "x-template-scope",
				detail: fmt.Sprintf("{{ %s }} uses %s, but this value is evaluated when the run starts, before any step ran, over %s only (like {{ %s.customer }})",
					truncate(e, 80), bad, strings.Join(sp.roots, ", "), sp.roots[0]),
				hint: workflow.Hint{Allowed: sp.roots}}
			if fixed := stepOutputRef.ReplaceAllString(s, sp.roots[0]+"."); fixed != s && slices.Contains(sp.roots, "input") && c.inScope(fixed, sp.roots) {
				viol.hint.DidYouMean = fixed
			}
			return viol
		}
	}
	return nil
}

// inScope reports whether every template of s uses only roots.
func (c *Catalog) inScope(s string, roots []string) bool {
	exprs, err := splitTemplates(s)
	if err != nil {
		return false
	}
	for _, e := range exprs {
		if c.outOfScope(e, roots) != "" {
			return false
		}
	}
	return true
}

// outOfScope is the first name expression src reads from outside roots ("" when none, or
// when src does not parse: that is invalid_expression's to say).
func (c *Catalog) outOfScope(src string, roots []string) string {
	tree, err := parseTree(src, c.exprs.conf)
	if err != nil {
		return ""
	}
	v := &rootVisitor{callees: map[string]bool{}, locals: map[string]bool{}}
	ast.Walk(&tree.Node, v)
	for _, id := range v.idents {
		if slices.Contains(roots, id) || v.locals[id] || v.callees[id] || id == "$env" {
			continue
		}
		if _, ok := builtin.Index[id]; ok {
			continue
		}
		if isRoot(id) {
			return id + "." // steps, run, workflow: a root of the run, not of the start
		}
		return fmt.Sprintf("%q", id)
	}
	return ""
}

// rootVisitor collects the bare identifiers an expression reads.
type rootVisitor struct {
	idents          []string
	callees, locals map[string]bool
}

func (v *rootVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok {
			v.callees[id.Value] = true
		}
	case *ast.VariableDeclaratorNode:
		v.locals[n.Name] = true
	case *ast.IdentifierNode:
		v.idents = append(v.idents, n.Value)
	}
}
