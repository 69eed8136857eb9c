package catalog

import (
	"encoding/json"
	"strings"

	"svc.dev/services/workflow-editor/internal/domain/repair"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// Repairs of expressions and templates. A validation error of a param carries as did_you_mean
// the param's whole value with every problem of it fixed, so that a client sets it at the
// error's pointer: the slips other languages cause ("=" for "==", SQL's <> and IS NULL,
// Python's True and None, JavaScript's === and null, a dangling operator, a missing
// parenthesis: repair.FixSyntax), references to a misspelt block or one that is not upstream, and fields an
// upstream block's output does not have. A repair is offered only when the value it makes
// validates cleanly in the block's place in the graph.

// ---------------------------------------------------------------------------------------------
// Output shapes

// shape is what is known of the fields of a value. nil means nothing is known: any path may
// be valid.
type shape struct {
	// fields holds the fields of a closed object: no other may be read.
	fields map[string]*shape
	// leaf marks a scalar: it has no fields at all.
	leaf bool
	// mapOf, when not nil, is the shape of every value of an object whose keys are free
	// (headers): any field may be read, and what it holds is known.
	mapOf *shape
}

// shapeOfSchema reads a JSON Schema as a shape: a closed object only where the schema says
// additionalProperties false (or a oneOf of such objects), a scalar where it has a scalar type
// or const.
func shapeOfSchema(m map[string]any) *shape {
	if m == nil {
		return nil
	}
	if branches, ok := m["oneOf"].([]any); ok {
		u := &shape{fields: map[string]*shape{}}
		for _, b := range branches {
			bm, _ := b.(map[string]any)
			s := shapeOfSchema(bm)
			if s == nil || s.fields == nil {
				return nil
			}
			for k, f := range s.fields {
				if _, dup := u.fields[k]; !dup {
					u.fields[k] = f
				}
			}
		}
		return u
	}
	if c, ok := m["const"]; ok {
		if _, isObj := c.(map[string]any); !isObj {
			return &shape{leaf: true}
		}
	}
	switch m["type"] {
	case "string", "integer", "number", "boolean":
		return &shape{leaf: true}
	}
	props, hasProps := m["properties"].(map[string]any)
	if ap, isMap := m["additionalProperties"].(map[string]any); isMap && !hasProps {
		if elem := shapeOfSchema(ap); elem != nil {
			return &shape{mapOf: elem}
		}
		return nil
	}
	if ap, isBool := m["additionalProperties"].(bool); hasProps && isBool && !ap {
		s := &shape{fields: map[string]*shape{}}
		for k, p := range props {
			pm, _ := p.(map[string]any)
			s.fields[k] = shapeOfSchema(pm)
		}
		return s
	}
	return nil
}

// shapeOfValue is the shape of a transform's output: its value with templates evaluated. A
// literal object is closed; a templated string may become anything.
func shapeOfValue(v any) *shape {
	switch x := v.(type) {
	case map[string]any:
		s := &shape{fields: map[string]*shape{}}
		for k, e := range x {
			s.fields[k] = shapeOfValue(e)
		}
		return s
	case string:
		if hasTemplate(x) {
			return nil
		}
		return &shape{leaf: true}
	case json.Number, bool, nil:
		return &shape{leaf: true}
	}
	return nil
}

// outputShape is the shape of block b's output.
func (c *Catalog) outputShape(b workflow.Block) *shape {
	if b.Type == "transform" {
		return shapeOfValue(b.Params["value"])
	}
	k, ok := c.Lookup(b.Type)
	if !ok {
		return nil
	}
	return k.output
}

// badField is the index in path of the first field sh does not have, or -1.
func badField(sh *shape, path []string) int {
	for i, f := range path {
		switch {
		case sh == nil:
			return -1
		case sh.leaf:
			return i
		case sh.mapOf != nil:
			sh = sh.mapOf
			continue
		}
		next, ok := sh.fields[f]
		if !ok {
			return i
		}
		sh = next
	}
	return -1
}

// fixPath repairs a path into sh: a misspelt field becomes the field meant; a field that only
// one field holds ("payload" inside "signal") or that only the one field of unknown content
// may hold ("total" inside http.request's "body") gets that field before it.
func fixPath(sh *shape, path []string) ([]string, bool) {
	out := make([]string, 0, len(path)+2)
	for i := 0; i < len(path); i++ {
		f := path[i]
		if sh == nil {
			return append(out, path[i:]...), true
		}
		if sh.leaf {
			return nil, false
		}
		if sh.mapOf != nil {
			out = append(out, f)
			sh = sh.mapOf
			continue
		}
		if next, ok := sh.fields[f]; ok {
			out = append(out, f)
			sh = next
			continue
		}
		names := sortedKeys(sh.fields)
		if c := repair.Closest(f, names); c != "" {
			out = append(out, c)
			sh = sh.fields[c]
			continue
		}
		var holders, open []string
		for _, n := range names {
			sub := sh.fields[n]
			if sub == nil {
				open = append(open, n)
			} else if _, ok := sub.fields[f]; ok {
				holders = append(holders, n)
			}
		}
		switch {
		case len(holders) == 1:
			out = append(out, holders[0])
			sh = sh.fields[holders[0]]
		case len(holders) == 0 && len(open) == 1:
			out = append(out, open[0])
			sh = nil
		default:
			return nil, false
		}
		i-- // read f again, inside the field added
	}
	return out, true
}

// ---------------------------------------------------------------------------------------------
// Repairs in a block's place

// repairExpression is src with every problem the validator finds in it fixed, or "" when no
// repair makes it clean. i is the block it belongs to.
func (v *validator) repairExpression(i int, src string) string {
	s := repair.FixSyntax(src)
	if _, err := v.cat.exprs.references(s); err != nil {
		return ""
	}
	return v.fixReferences(i, s)
}

// fixReferences rewrites the references of s (which parses) that cannot resolve.
func (v *validator) fixReferences(i int, s string) string {
	refs, err := v.cat.exprs.references(s)
	if err != nil {
		return s
	}
	badIdent := map[string]bool{}
	calls := map[string]string{}
	for _, r := range refs {
		switch {
		case r.call && r.didYouMean != "":
			calls[strings.TrimSuffix(r.text, "()")] = r.didYouMean
		case r.problem != "" && r.step == "" && !strings.Contains(r.text, "."):
			badIdent[r.text] = true
		}
	}
	cs := repair.Chains(s)
	for j := len(cs) - 1; j >= 0; j-- {
		ch := cs[j]
		repl := ""
		root := ch.Parts[0]
		switch {
		case ch.Call && len(ch.Parts) == 1 && calls[root] != "":
			repl = calls[root]
		case ch.Call:
		case root == scopeSteps && len(ch.Parts) > 1:
			if parts, ok := v.fixSteps(i, ch.Parts[1:]); ok {
				repl = scopeSteps + "." + strings.Join(parts, ".")
			}
		case (root == scopeRun || root == scopeWorkflow) && len(ch.Parts) == 2 && ch.Parts[1] != "id":
			repl = root + ".id"
		case badIdent[root]:
			if id := v.upstreamNamed(i, root); id != "" {
				if parts, ok := v.fixSteps(i, append([]string{id}, ch.Parts[1:]...)); ok {
					repl = scopeSteps + "." + strings.Join(parts, ".")
				}
			} else if strings.HasPrefix(strings.ToLower(root), "in") && repair.Closest(root, scopeRoots()) == scopeInput {
				repl = strings.Join(append([]string{scopeInput}, ch.Parts[1:]...), ".")
			}
		}
		if repl != "" {
			s = s[:ch.Start] + repl + s[ch.End:]
		}
	}
	return s
}

// upstreamNamed is the upstream block of block i whose id is name (case aside), or "".
func (v *validator) upstreamNamed(i int, name string) string {
	for _, id := range v.upstreamIDs(i) {
		if strings.EqualFold(id, name) {
			return id
		}
	}
	return ""
}

// fixSteps repairs the parts of a steps.<...> reference of block i: the block meant and the
// path into its output.
func (v *validator) fixSteps(i int, parts []string) ([]string, bool) {
	id := parts[0]
	upstream := v.upstreamIDs(i)
	target, used := "", 1
	j, exists := v.index[id]
	switch {
	case exists && v.upstream(j, i):
		target = id
	case v.upstreamNamed(i, id) != "":
		target = v.upstreamNamed(i, id)
	default:
		if t, n := v.upstreamOfType(i, upstream, parts); t != "" {
			target, used = t, n
			break
		}
		if !exists {
			target = v.sug.Closest(id, upstream)
			break
		}
		// Itself, or a block on another branch: the block just before, when there is one
		// and it plainly is the block meant (same type, or its output has the fields read).
		if p := v.soleParent(i); p >= 0 {
			rest := outputPath(parts[1:])
			pb := v.def.Blocks[p]
			sh := v.cat.outputShape(pb)
			if pb.Type == v.def.Blocks[j].Type || sh != nil && len(rest) > 0 && badField(sh, rest) < 0 {
				target = pb.ID
			}
		}
	}
	if target == "" {
		return nil, false
	}
	rest := parts[used:]
	switch {
	case len(rest) == 0:
		rest = []string{"output"}
	case rest[0] != "output":
		if repair.Closest(rest[0], []string{"output"}) == "output" && len(rest[0]) >= 4 {
			rest = append([]string{"output"}, rest[1:]...)
		} else {
			rest = append([]string{"output"}, rest...)
		}
	}
	path, ok := fixPath(v.cat.outputShape(v.def.Blocks[v.index[target]]), rest[1:])
	if !ok {
		return nil, false
	}
	return append([]string{target, "output"}, path...), true
}

// outputPath is the path into the output of parts (what follows steps.<id>).
func outputPath(parts []string) []string {
	if len(parts) > 0 && parts[0] == "output" {
		return parts[1:]
	}
	return parts
}

// upstreamOfType is the one upstream block whose type (or an alias of it) is named by the
// first parts of a reference, with how many parts name it: "steps.http.request.output"
// written for the id of the only upstream http.request.
func (v *validator) upstreamOfType(i int, upstream []string, parts []string) (string, int) {
	for n := min(3, len(parts)); n >= 1; n-- {
		name := strings.Join(parts[:n], ".")
		t := ""
		if _, ok := v.cat.Lookup(name); ok {
			t = name
		} else if a, ok := v.cat.aliases[repair.Normalize(name)]; ok {
			t = a
		}
		if t == "" {
			continue
		}
		var found []string
		for _, id := range upstream {
			if v.def.Blocks[v.index[id]].Type == t {
				found = append(found, id)
			}
		}
		if len(found) == 1 {
			return found[0], n
		}
		return "", 0
	}
	return "", 0
}

// soleParent is the index of the one block with an edge into block i, or -1.
func (v *validator) soleParent(i int) int {
	if len(v.preds[i]) != 1 {
		return -1
	}
	return v.preds[i][0]
}

// repairTemplates is s with the expression of each of its templates repaired, or "".
func (v *validator) repairTemplates(i int, s string) string {
	var b strings.Builder
	rest := s
	for {
		start := strings.Index(rest, "{{")
		if start < 0 {
			b.WriteString(rest)
			break
		}
		end := strings.Index(rest[start+2:], "}}")
		if end < 0 {
			return ""
		}
		inner := rest[start+2 : start+2+end]
		expr := strings.TrimSpace(inner)
		fixed := expr
		if v.problemsOf(i, expr) > 0 {
			if fixed = v.repairExpression(i, expr); fixed == "" {
				return ""
			}
		}
		lead := inner[:len(inner)-len(strings.TrimLeft(inner, " \t\n"))]
		trail := inner[len(strings.TrimRight(inner, " \t\n")):]
		b.WriteString(rest[:start] + "{{" + lead + fixed + trail + "}}")
		rest = rest[start+2+end+2:]
	}
	return b.String()
}

// problemsOf counts the validation errors expression src would have in block i.
func (v *validator) problemsOf(i int, src string) int {
	saved, dropped := v.errs, v.dropped
	v.errs = nil
	v.expression(i, v.def.Blocks[i], "", src, src)
	n := len(v.errs)
	v.errs, v.dropped = saved, dropped
	return n
}

// templateProblems counts the validation errors the templates of s would have in block i.
func (v *validator) templateProblems(i int, s string) int {
	saved, dropped := v.errs, v.dropped
	v.errs = nil
	v.templates(i, v.def.Blocks[i], "", s)
	n := len(v.errs)
	v.errs, v.dropped = saved, dropped
	return n
}
