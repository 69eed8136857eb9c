package workflow

import (
	"fmt"
	"strings"
)

// ValidationCode names a problem of a workflow's graph (contract §2). A workflow with any can
// be saved but not run.
type ValidationCode string

// Every validation code of the contract.
const (
	ValidationNoTrigger              ValidationCode = "no_trigger"
	ValidationMultipleTriggers       ValidationCode = "multiple_triggers"
	ValidationTriggerHasIncomingEdge ValidationCode = "trigger_has_incoming_edge"
	ValidationUnreachableBlock       ValidationCode = "unreachable_block"
	ValidationMissingRequiredParam   ValidationCode = "missing_required_param"
	ValidationUnknownReference       ValidationCode = "unknown_reference"
	ValidationInvalidExpression      ValidationCode = "invalid_expression"
)

// ValidationError is one problem of a definition.
type ValidationError struct {
	Code       ValidationCode
	BlockID    string
	Message    string
	Pointer    string // into the block: "/params/url"
	DidYouMean string
}

// Validate lists the problems of def: whole-workflow ones first, then block by block in block
// order. It never fails; an empty result means the workflow can run.
func (c *Catalog) Validate(def Definition) []ValidationError {
	v := newValidator(c, def)
	v.triggers()
	for _, blk := range def.Blocks {
		v.block(blk)
	}
	return v.errs
}

type validator struct {
	cat       *Catalog
	def       Definition
	index     map[string]int
	in        map[string][]string
	out       map[string][]string
	trigs     []string
	reachable map[string]bool
	ancestors []bitset // by block index, built on first need
	errs      []ValidationError
}

func newValidator(c *Catalog, def Definition) *validator {
	v := &validator{cat: c, def: def, index: make(map[string]int, len(def.Blocks)),
		in: map[string][]string{}, out: map[string][]string{}}
	for i, b := range def.Blocks {
		v.index[b.ID] = i
	}
	for _, e := range def.Edges {
		v.in[e.To] = append(v.in[e.To], e.From)
		v.out[e.From] = append(v.out[e.From], e.To)
	}
	return v
}

func (v *validator) add(e ValidationError) { v.errs = append(v.errs, e) }

func (v *validator) triggers() {
	var triggerTypes []string
	for _, t := range v.cat.Types() {
		if k, _ := v.cat.Lookup(t); k.IsTrigger() {
			triggerTypes = append(triggerTypes, t)
		}
	}
	for _, b := range v.def.Blocks {
		if k, ok := v.cat.Lookup(b.Type); ok && k.IsTrigger() {
			v.trigs = append(v.trigs, b.ID)
		}
	}
	switch {
	case len(v.trigs) == 0:
		v.add(ValidationError{Code: ValidationNoTrigger,
			Message: fmt.Sprintf("The workflow has no trigger block, so nothing starts it. Add one block of type %s and connect it to the first step.",
				strings.Join(triggerTypes, ", "))})
	case len(v.trigs) > 1:
		for _, t := range v.trigs[1:] {
			v.add(ValidationError{Code: ValidationMultipleTriggers, BlockID: t,
				Message: fmt.Sprintf("Block %q is a second trigger; the workflow already starts at %q. A workflow has exactly one trigger (any trigger type can be started manually, by a schedule or by a webhook): remove %q or %q.",
					t, v.trigs[0], t, v.trigs[0])})
		}
	}
	v.reachable = map[string]bool{}
	stack := append([]string(nil), v.trigs...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if v.reachable[n] {
			continue
		}
		v.reachable[n] = true
		stack = append(stack, v.out[n]...)
	}
}

func (v *validator) block(b Block) {
	conn, known := v.cat.Lookup(b.Type)
	isTrigger := known && conn.IsTrigger()
	if isTrigger && len(v.in[b.ID]) > 0 {
		v.add(ValidationError{Code: ValidationTriggerHasIncomingEdge, BlockID: b.ID,
			Message: fmt.Sprintf("Trigger %q has incoming edges from %s; a trigger starts the workflow and nothing may lead into it. Disconnect them.",
				b.ID, listOf(v.in[b.ID], maxListed))})
	}
	if len(v.trigs) > 0 && !isTrigger && !v.reachable[b.ID] {
		v.add(ValidationError{Code: ValidationUnreachableBlock, BlockID: b.ID,
			Message: fmt.Sprintf("Block %q cannot be reached from the trigger %q: no path of edges leads to it, so it would never run. Connect it from the trigger or a block after it, or remove it.",
				b.ID, v.trigs[0])})
	}
	if !known {
		return
	}
	missing, oneOf := conn.missingParams(b.Params)
	for _, m := range missing {
		v.add(ValidationError{Code: ValidationMissingRequiredParam, BlockID: b.ID, Pointer: "/params/" + escapePointer(m),
			Message: fmt.Sprintf("Block %q (%s) needs param %q. Set it with an update operation: {\"operation_type\":\"update\",\"block_id\":%q,\"params\":{%q: ...}}.",
				b.ID, b.Type, m, b.ID, m)})
	}
	if oneOf != nil {
		v.add(ValidationError{Code: ValidationMissingRequiredParam, BlockID: b.ID, Pointer: "/params",
			Message: fmt.Sprintf("Block %q (%s) needs exactly one of the params %s; none is set.", b.ID, b.Type, listOf(oneOf, 10))})
	}
	for _, k := range sortedKeys(b.Params) {
		ptr := "/params/" + escapePointer(k)
		if s, ok := b.Params[k].(string); ok && conn.isExpression(k) {
			v.expression(b, ptr, s, s)
			continue
		}
		v.templates(b, ptr, b.Params[k])
	}
}

// templates checks every {{ expr }} in the strings of value.
func (v *validator) templates(b Block, ptr string, value any) {
	switch x := value.(type) {
	case string:
		if !hasTemplate(x) {
			return
		}
		exprs, err := splitTemplates(x)
		if err != nil {
			v.add(ValidationError{Code: ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr,
				Message: fmt.Sprintf("Block %q, %s: %s; a template is written {{ expr }}.", b.ID, ptr, err)})
		}
		for _, e := range exprs {
			v.expression(b, ptr, e, "{{ "+e+" }}")
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			v.templates(b, ptr+"/"+escapePointer(k), x[k])
		}
	case []any:
		for i, e := range x {
			v.templates(b, fmt.Sprintf("%s/%d", ptr, i), e)
		}
	}
}

// expression checks one expression: it parses, and every reference it makes can resolve.
func (v *validator) expression(b Block, ptr, src, shown string) {
	refs, err := v.cat.exprs.references(src)
	if err != nil {
		v.add(ValidationError{Code: ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr,
			Message: fmt.Sprintf("Block %q, %s: %s is not a valid expr-lang expression: %s.", b.ID, ptr, truncate(shown, 200), err)})
		return
	}
	for _, r := range refs {
		switch {
		case r.problem != "":
			v.add(ValidationError{Code: ValidationUnknownReference, BlockID: b.ID, Pointer: ptr, DidYouMean: r.didYouMean,
				Message: fmt.Sprintf("Block %q, %s: reference %s cannot resolve: %s", b.ID, ptr, r.text, r.problem)})
		case r.step != "":
			v.stepReference(b, ptr, r)
		}
	}
}

func (v *validator) stepReference(b Block, ptr string, r reference) {
	target, exists := v.index[r.step]
	if exists && v.upstream(target, v.index[b.ID]) {
		return
	}
	upstream := v.upstreamIDs(v.index[b.ID])
	msg := fmt.Sprintf("Block %q, %s: reference %s names ", b.ID, ptr, r.text)
	switch {
	case !exists:
		msg += fmt.Sprintf("block %q, which does not exist.", r.step)
	case r.step == b.ID:
		msg += "the block itself; a block can only read the output of blocks before it."
	default:
		msg += fmt.Sprintf("block %q, which is not upstream of %q: no path of edges leads from it to %q, so its output may not exist when %q runs. Connect %q to %q (directly or through other blocks), or reference an upstream block.",
			r.step, b.ID, b.ID, b.ID, r.step, b.ID)
	}
	if len(upstream) == 0 {
		msg += fmt.Sprintf(" %q has no upstream blocks yet.", b.ID)
	} else {
		msg += fmt.Sprintf(" Upstream of %q: %s.", b.ID, listOf(upstream, maxListed))
	}
	v.add(ValidationError{Code: ValidationUnknownReference, BlockID: b.ID, Pointer: ptr, DidYouMean: closest(r.step, upstream), Message: msg})
}

// upstream reports whether block a leads to block b.
func (v *validator) upstream(a, b int) bool {
	v.buildAncestors()
	return v.ancestors[b].has(a)
}

func (v *validator) upstreamIDs(b int) []string {
	v.buildAncestors()
	var ids []string
	for i, blk := range v.def.Blocks {
		if v.ancestors[b].has(i) {
			ids = append(ids, blk.ID)
		}
	}
	return ids
}

// buildAncestors computes every block's ancestor set as a bitset, in topological order: linear
// in edges times blocks/64, so a thousand-block workflow costs well under a millisecond.
func (v *validator) buildAncestors() {
	if v.ancestors != nil {
		return
	}
	n := len(v.def.Blocks)
	v.ancestors = make([]bitset, n)
	words := (n + 63) / 64
	indeg := make([]int, n)
	for i := range v.ancestors {
		v.ancestors[i] = make(bitset, words)
	}
	for _, e := range v.def.Edges {
		if _, ok := v.index[e.From]; ok {
			if to, ok := v.index[e.To]; ok {
				indeg[to]++
			}
		}
	}
	queue := make([]int, 0, n)
	for i := range indeg {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, to := range v.out[v.def.Blocks[i].ID] {
			j, ok := v.index[to]
			if !ok {
				continue
			}
			v.ancestors[j].or(v.ancestors[i])
			v.ancestors[j].set(i)
			indeg[j]--
			if indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
}

type bitset []uint64

func (s bitset) set(i int)      { s[i/64] |= 1 << (uint(i) % 64) }
func (s bitset) has(i int) bool { return s[i/64]&(1<<(uint(i)%64)) != 0 }
func (s bitset) or(o bitset) {
	for i := range s {
		s[i] |= o[i]
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Checked is a workflow together with the problems of its definition, as readers see it.
type Checked struct {
	*Workflow
	ValidationErrors []ValidationError
}

// Check validates w's definition against the catalog.
func (c *Catalog) Check(w *Workflow) Checked {
	return Checked{Workflow: w, ValidationErrors: c.Validate(w.Definition())}
}
