package catalog

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"svc.dev/services/workflow-editor/internal/domain/repair"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// Validate lists the problems of def: whole-workflow ones first, then block by block in block
// order, at most MaxValidationErrors of them. It never fails; an empty result means the
// workflow can run.
func (c *Catalog) Validate(def workflow.Definition) []workflow.ValidationError {
	v := newValidator(c, def)
	v.triggers()
	for i, blk := range def.Blocks {
		v.block(i, blk)
	}
	return v.result()
}

type validator struct {
	cat       *Catalog
	def       workflow.Definition
	index     map[string]int
	in        map[string][]string
	out       map[string][]string
	preds     [][]int // by block index: the blocks with an edge into it
	trigs     []string
	reachable map[string]bool
	sug       *repair.Suggester
	// The ancestors of one block at a time: block i is one when marks[i] == stamp. Memory stays
	// linear in the graph, whatever its shape; each block that needs its ancestors costs one
	// walk up the graph.
	marks     []int
	stamp     int
	markedFor int
	queue     []int
	errs      []workflow.ValidationError
	dropped   int
}

func newValidator(c *Catalog, def workflow.Definition) *validator {
	n := len(def.Blocks)
	v := &validator{cat: c, def: def, index: make(map[string]int, n),
		in: make(map[string][]string, n), out: make(map[string][]string, n), preds: make([][]int, n),
		sug: repair.NewSuggester(), markedFor: -1}
	for i, b := range def.Blocks {
		v.index[b.ID] = i
	}
	for _, e := range def.Edges {
		v.in[e.To] = append(v.in[e.To], e.From)
		v.out[e.From] = append(v.out[e.From], e.To)
		from, ok1 := v.index[e.From]
		to, ok2 := v.index[e.To]
		if ok1 && ok2 {
			v.preds[to] = append(v.preds[to], from)
		}
	}
	return v
}

// full reports whether the list of errors is complete; what is found after only counts.
func (v *validator) full() bool { return len(v.errs) >= workflow.MaxValidationErrors }

func (v *validator) add(e workflow.ValidationError) {
	if v.full() {
		v.dropped++
		return
	}
	v.errs = append(v.errs, e)
}

func (v *validator) result() []workflow.ValidationError {
	if v.dropped > 0 {
		last := &v.errs[len(v.errs)-1]
		last.Message += fmt.Sprintf(" (%d more validation errors are not listed: fix these, and the next ones are listed.)", v.dropped)
	}
	return v.errs
}

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
		// The trigger meant is almost always the manual one: any workflow may also be started
		// by a schedule or a webhook whatever its trigger.
		e := workflow.ValidationError{Code: workflow.ValidationNoTrigger, DidYouMean: "trigger.manual",
			Message: fmt.Sprintf("The workflow has no trigger block, so nothing starts it. Add one block of type %s (most likely trigger.manual; any workflow can also be started by a schedule or a webhook) and connect it to the first step.",
				strings.Join(triggerTypes, ", "))}
		for _, b := range v.def.Blocks {
			if len(v.in[b.ID]) == 0 {
				e.NoIncomingEdge = append(e.NoIncomingEdge, b.ID)
			}
		}
		if len(e.NoIncomingEdge) > 0 {
			e.Message += fmt.Sprintf(" Blocks no edge leads into (connect the trigger to them): %s.", listOf(e.NoIncomingEdge, maxListed))
			if len(e.NoIncomingEdge) > maxListed {
				e.NoIncomingEdge = e.NoIncomingEdge[:maxListed]
			}
		}
		v.add(e)
	case len(v.trigs) > 1:
		for _, t := range v.trigs[1:] {
			v.add(workflow.ValidationError{Code: workflow.ValidationMultipleTriggers, BlockID: t,
				Message: fmt.Sprintf("Block %q is a second trigger; the workflow already starts at %q. A workflow has exactly one trigger (any trigger type can be started manually, by a schedule or by a webhook): remove %q or %q.",
					t, v.trigs[0], t, v.trigs[0])})
		}
	}
	v.reachable = make(map[string]bool, len(v.def.Blocks))
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

func (v *validator) block(i int, b workflow.Block) {
	conn, known := v.cat.Lookup(b.Type)
	isTrigger := known && conn.IsTrigger()
	if isTrigger && len(v.in[b.ID]) > 0 {
		v.add(workflow.ValidationError{Code: workflow.ValidationTriggerHasIncomingEdge, BlockID: b.ID,
			Message: fmt.Sprintf("Trigger %q has incoming edges from %s; a trigger starts the workflow and nothing may lead into it. Disconnect them.",
				b.ID, listOf(v.in[b.ID], maxListed))})
	}
	if len(v.trigs) > 0 && !isTrigger && !v.reachable[b.ID] {
		v.add(workflow.ValidationError{Code: workflow.ValidationUnreachableBlock, BlockID: b.ID,
			Message: fmt.Sprintf("Block %q cannot be reached from the trigger %q: no path of edges leads to it, so it would never run. Connect it from the trigger or a block after it, or remove it.",
				b.ID, v.trigs[0])})
	}
	if !known {
		return
	}
	missing, oneOf := conn.missingParams(b.Params)
	for _, m := range missing {
		v.add(workflow.ValidationError{Code: workflow.ValidationMissingRequiredParam, BlockID: b.ID, Pointer: "/params/" + escapePointer(m),
			Message: fmt.Sprintf("Block %q (%s) needs param %q. Set it with an update operation: {\"operation_type\":\"update\",\"block_id\":%q,\"params\":{%q: ...}}.",
				b.ID, b.Type, m, b.ID, m)})
	}
	if oneOf != nil {
		v.add(workflow.ValidationError{Code: workflow.ValidationMissingRequiredParam, BlockID: b.ID, Pointer: "/params",
			Message: fmt.Sprintf("Block %q (%s) needs exactly one of the params %s; none is set.", b.ID, b.Type, listOf(oneOf, 10))})
	}
	for _, k := range sortedKeys(b.Params) {
		ptr := "/params/" + escapePointer(k)
		if s, ok := b.Params[k].(string); ok && conn.isExpression(k) {
			if hasTemplate(s) {
				v.wrapped(i, b, ptr, k, s)
				continue
			}
			mark := len(v.errs)
			v.expression(i, b, ptr, s, s)
			v.suggest(mark, ptr, func() string {
				if fixed := v.repairExpression(i, s); fixed != "" && fixed != s && v.problemsOf(i, fixed) == 0 {
					return fixed
				}
				return ""
			})
			continue
		}
		v.templates(i, b, ptr, b.Params[k])
	}
}

// suggest sets, on the errors listed since mark at ptr, the repaired value fix returns (""
// when none repairs every problem). A value's errors all carry the same repair: the value
// with all of them fixed, which is only offered when it validates cleanly.
func (v *validator) suggest(mark int, ptr string, fix func() string) {
	if len(v.errs) <= mark || ptr == "" {
		return
	}
	fixed := fix()
	var missing []string
	if fixed != "" {
		blk := v.def.Blocks[v.index[v.errs[mark].BlockID]]
		missing = v.missingIn(valueAtPointer(blk, ptr))
	}
	for j := mark; j < len(v.errs); j++ {
		if v.errs[j].Pointer != ptr {
			continue
		}
		v.errs[j].DidYouMean = fixed
		v.errs[j].SetMissing(missing)
		if fixed != "" {
			v.errs[j].Message += fmt.Sprintf(" Repaired, %s is %q: set it (did_you_mean).", ptr, truncate(fixed, 200))
		}
	}
}

// valueAtPointer is the string at ptr ("/params/...") in block b.
func valueAtPointer(b workflow.Block, ptr string) string {
	var loc []string
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/params/"), "/") {
		loc = append(loc, unescapePointer(tok))
	}
	got, _ := valueAt(b.Params, loc)
	s, _ := got.(string)
	return s
}

// missingIn lists the names in the expressions of s that could be block ids but name no block.
func (v *validator) missingIn(s string) []string {
	var out []string
	for _, ch := range repair.Chains(s) {
		id := ch.Parts[0]
		if id == scopeSteps && len(ch.Parts) > 1 {
			id = ch.Parts[1]
		}
		if _, ok := v.index[id]; !ok && !isRoot(id) {
			out = append(out, id)
		}
	}
	return out
}

// InLightOf is errs (a definition's validation errors, which a cache may share) as the reply
// to a batch with the skipped operations skipped shows them: a suggestion that only holds
// while a skipped operation stays skipped is taken back. No trigger is suggested when the
// batch's own trigger was skipped, nor an edge from it into a block that a skipped connect
// leads into, nor another block for a reference to one whose add was skipped: the repair is
// that operation's.
func (c *Catalog) InLightOf(errs []workflow.ValidationError, ops []workflow.Op, skipped []workflow.Skip) []workflow.ValidationError {
	if len(skipped) == 0 || len(errs) == 0 {
		return errs
	}
	pendingBlock := map[string]bool{}
	pendingEdgeTo := map[string]bool{}
	trigger := -1
	for _, s := range skipped {
		if s.OperationIndex < 0 || s.OperationIndex >= len(ops) {
			continue
		}
		op := ops[s.OperationIndex]
		switch workflow.OpType(op.Type) {
		case workflow.OpAdd:
			pendingBlock[op.BlockID] = true
			if id := sanitizeID(op.BlockID); id != "" {
				pendingBlock[id] = true
			}
			if k, ok := c.Lookup(op.BlockType); ok && k.IsTrigger() {
				trigger = s.OperationIndex
			} else if k, ok := c.Lookup(c.suggestType(op.BlockType)); ok && k.IsTrigger() {
				trigger = s.OperationIndex
			}
		case workflow.OpConnect:
			pendingEdgeTo[op.TargetBlockID] = true
		}
	}
	out := make([]workflow.ValidationError, len(errs))
	copy(out, errs)
	for i := range out {
		e := &out[i]
		switch {
		case e.Code == workflow.ValidationNoTrigger && trigger >= 0:
			e.DidYouMean, e.NoIncomingEdge = "", nil
			e.Message += fmt.Sprintf(" Operation %d of this batch, which adds a trigger, was skipped: repair it rather than adding another trigger.", trigger)
		case e.Code == workflow.ValidationNoTrigger:
			var kept []string
			for _, id := range e.NoIncomingEdge {
				if !pendingEdgeTo[id] {
					kept = append(kept, id)
				}
			}
			if len(kept) == 0 && len(e.NoIncomingEdge) > 0 {
				e.DidYouMean = ""
			}
			e.NoIncomingEdge = kept
		case e.DidYouMean != "":
			for _, id := range e.Missing() {
				if pendingBlock[id] {
					e.DidYouMean = ""
					if k := strings.Index(e.Message, " Repaired, "); k >= 0 {
						e.Message = e.Message[:k]
					}
					e.Message += fmt.Sprintf(" (Block %q is missing because its add was skipped in this batch: repair that add.)", id)
					break
				}
			}
		}
	}
	return out
}

// wrapped reports an expression param written as a template: it is a bare expression.
func (v *validator) wrapped(i int, b workflow.Block, ptr, name, s string) {
	e := workflow.ValidationError{Code: workflow.ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr,
		Message: fmt.Sprintf("Block %q, %s: %s is a bare expr-lang expression, not a {{ }} template; write it without the braces.", b.ID, ptr, name)}
	if bare, ok := stripTemplates(s); ok && bare != "" {
		if v.problemsOf(i, bare) > 0 {
			bare = v.repairExpression(i, bare)
			if bare == "" || v.problemsOf(i, bare) > 0 {
				v.add(e)
				return
			}
		}
		e.DidYouMean = bare
		e.Message = fmt.Sprintf("Block %q, %s: %s is a bare expr-lang expression, not a {{ }} template: send %q.", b.ID, ptr, name, truncate(bare, 200))
	}
	v.add(e)
}

// templates checks every {{ expr }} in the strings of value.
func (v *validator) templates(i int, b workflow.Block, ptr string, value any) {
	switch x := value.(type) {
	case string:
		if !hasTemplate(x) {
			return
		}
		mark := len(v.errs)
		exprs, err := splitTemplates(x)
		if err != nil {
			v.add(workflow.ValidationError{Code: workflow.ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr,
				Message: fmt.Sprintf("Block %q, %s: %s; a template is written {{ expr }}.", b.ID, ptr, err)})
		}
		for _, e := range exprs {
			v.expression(i, b, ptr, e, "{{ "+e+" }}")
		}
		if err == nil {
			v.suggest(mark, ptr, func() string {
				if fixed := v.repairTemplates(i, x); fixed != "" && fixed != x && v.templateProblems(i, fixed) == 0 {
					return fixed
				}
				return ""
			})
		} else {
			// No whole repaired value (the template does not close): the guesses the
			// references made (a block id, a name) are not values to set at ptr.
			v.suggest(mark, ptr, func() string { return "" })
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			v.templates(i, b, ptr+"/"+escapePointer(k), x[k])
		}
	case []any:
		for j, e := range x {
			v.templates(i, b, fmt.Sprintf("%s/%d", ptr, j), e)
		}
	}
}

// expression checks one expression: it parses, it calls only functions that exist, and every
// reference it makes can resolve.
func (v *validator) expression(i int, b workflow.Block, ptr, src, shown string) {
	refs, err := v.cat.exprs.references(src)
	if err != nil {
		v.add(workflow.ValidationError{Code: workflow.ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr,
			Message: fmt.Sprintf("Block %q, %s: %s is not a valid expr-lang expression: %s.", b.ID, ptr, truncate(shown, 200), err)})
		return
	}
	if err := v.cat.exprs.limits(src); err != nil {
		// Stored before the limit, or sent where no patch checks it: the engine would refuse
		// to compile it.
		v.add(workflow.ValidationError{Code: workflow.ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr,
			Message: fmt.Sprintf("Block %q, %s: %s is too large to run: %s.", b.ID, ptr, truncate(shown, 200), tooLarge(err))})
		return
	}
	for _, r := range refs {
		switch {
		case r.call:
			v.add(workflow.ValidationError{Code: workflow.ValidationInvalidExpression, BlockID: b.ID, Pointer: ptr, DidYouMean: r.didYouMean,
				Message: fmt.Sprintf("Block %q, %s: %s cannot run: %s", b.ID, ptr, truncate(shown, 200), r.problem)})
		case r.problem != "":
			v.add(workflow.ValidationError{Code: workflow.ValidationUnknownReference, BlockID: b.ID, Pointer: ptr, DidYouMean: r.didYouMean,
				Message: fmt.Sprintf("Block %q, %s: reference %s cannot resolve: %s", b.ID, ptr, r.text, r.problem)})
		case r.step != "":
			v.stepReference(i, b, ptr, r)
		}
	}
	v.outputReferences(i, b, ptr, src)
}

// outputReferences checks the fields read from the outputs of upstream blocks, where the
// output's fields are known (a closed output schema, or a transform's literal value):
// steps.fetch.output.total, where an http.request outputs {status, headers, body, truncated},
// would fail the run.
func (v *validator) outputReferences(i int, b workflow.Block, ptr, src string) {
	for _, ch := range repair.Chains(src) {
		if ch.Call || len(ch.Parts) < 4 || ch.Parts[0] != scopeSteps || ch.Parts[2] != "output" {
			continue
		}
		j, ok := v.index[ch.Parts[1]]
		if !ok || !v.upstream(j, i) {
			continue
		}
		target := v.def.Blocks[j]
		sh := v.cat.outputShape(target)
		path := ch.Parts[3:]
		bad := badField(sh, path)
		if bad < 0 {
			continue
		}
		at := "steps." + strings.Join(ch.Parts[1:3+bad], ".")
		var fields string
		if node := shapeAt(sh, path[:bad]); node != nil && !node.leaf && node.mapOf == nil {
			fields = fmt.Sprintf(" it has %s", listOf(sortedKeys(node.fields), 20))
		} else {
			fields = " it is not an object"
		}
		msg := fmt.Sprintf("Block %q, %s: reference %s cannot resolve: %s (%s) has no field %q there;%s.",
			b.ID, ptr, strings.Join(ch.Parts, "."), at, target.Type, path[bad], fields)
		if fixed, ok := fixPath(sh, path); ok {
			msg += fmt.Sprintf(" Did you mean steps.%s.output.%s?", target.ID, strings.Join(fixed, "."))
		}
		v.add(workflow.ValidationError{Code: workflow.ValidationUnknownReference, BlockID: b.ID, Pointer: ptr, Message: msg})
	}
}

// shapeAt is the shape at path inside sh.
func shapeAt(sh *shape, path []string) *shape {
	for _, f := range path {
		switch {
		case sh == nil || sh.leaf:
			return nil
		case sh.mapOf != nil:
			sh = sh.mapOf
		default:
			sh = sh.fields[f]
		}
	}
	return sh
}

func (v *validator) stepReference(i int, b workflow.Block, ptr string, r reference) {
	target, exists := v.index[r.step]
	if exists && v.upstream(target, i) {
		return
	}
	if v.full() {
		v.dropped++ // not listed: spare the walk and the guess
		return
	}
	upstream := v.upstreamIDs(i)
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
	v.add(workflow.ValidationError{Code: workflow.ValidationUnknownReference, BlockID: b.ID, Pointer: ptr, DidYouMean: v.sug.Closest(r.step, upstream), Message: msg})
}

// upstream reports whether block a leads to block b: at once for an edge a -> b, the usual
// reference to the step just before; else by the ancestors of b.
func (v *validator) upstream(a, b int) bool {
	for _, p := range v.preds[b] {
		if p == a {
			return true
		}
	}
	v.markAncestors(b)
	return v.marks[a] == v.stamp
}

func (v *validator) upstreamIDs(b int) []string {
	v.markAncestors(b)
	var ids []string
	for i, blk := range v.def.Blocks {
		if v.marks[i] == v.stamp {
			ids = append(ids, blk.ID)
		}
	}
	return ids
}

// markAncestors marks the blocks that lead to block b, walking the edges backwards from it.
// Blocks are validated one after the other, so the marks of one block serve all its
// references.
func (v *validator) markAncestors(b int) {
	if v.markedFor == b {
		return
	}
	if v.marks == nil {
		v.marks = make([]int, len(v.def.Blocks))
	}
	v.stamp++
	v.markedFor = b
	queue := append(v.queue[:0], b)
	for len(queue) > 0 {
		n := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, p := range v.preds[n] {
			if v.marks[p] != v.stamp {
				v.marks[p] = v.stamp
				queue = append(queue, p)
			}
		}
	}
	v.queue = queue
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Check validates w's definition against the catalog; see ValidateVersion.
func (c *Catalog) Check(w *workflow.Workflow) workflow.Checked {
	return workflow.Checked{Workflow: w, ValidationErrors: c.ValidateVersion(w.ID(), w.Version(), w.Definition())}
}

// ValidateVersion is Validate for version version of workflow id, whose definition is def.
// A version's definition never changes (every change makes a new version, and only a
// committed one is read), so the result is remembered: reads of a workflow that did not change
// cost no validation. Callers share the slice returned and must not change it.
func (c *Catalog) ValidateVersion(id string, version int64, def workflow.Definition) []workflow.ValidationError {
	key := checkKey{id: id, version: version}
	if errs, ok := c.checks.get(key); ok {
		return errs
	}
	errs := c.Validate(def)
	c.checks.put(key, errs)
	return errs
}

// The validation cache holds at most maxCachedChecks results, of at most maxCachedCheckBytes
// of text in all; it forgets the oldest first.
const (
	maxCachedChecks     = 1024
	maxCachedCheckBytes = 16 << 20
)

// checkBytes is about the memory errs holds: the slice's whole backing array (its capacity, as
// append grew it), every string and the lists' entries. Counting only the strings' lengths
// and a fixed 64 bytes an error (as this cache once did) put a soak's cache at about 2.3
// times its budget.
func checkBytes(errs []workflow.ValidationError) int {
	n := 64 + cap(errs)*int(unsafe.Sizeof(workflow.ValidationError{}))
	for _, e := range errs {
		n += len(e.Code) + len(e.BlockID) + len(e.Message) + len(e.Pointer) + len(e.DidYouMean)
		for _, s := range e.NoIncomingEdge {
			n += int(unsafe.Sizeof(s)) + len(s)
		}
		for _, s := range e.Missing() {
			n += int(unsafe.Sizeof(s)) + len(s)
		}
	}
	return n
}

type checkKey struct {
	id      string
	version int64
}

type checkCache struct {
	mu      sync.Mutex
	entries map[checkKey]checkEntry
	order   []checkKey // oldest first
	bytes   int
}

type checkEntry struct {
	errs  []workflow.ValidationError
	bytes int
}

func newCheckCache() *checkCache { return &checkCache{entries: map[checkKey]checkEntry{}} }

func (c *checkCache) get(k checkKey) ([]workflow.ValidationError, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	return e.errs, ok
}

func (c *checkCache) put(k checkKey, errs []workflow.ValidationError) {
	n := checkBytes(errs)
	if n > maxCachedCheckBytes/8 {
		return // one huge result would push out many small ones
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	for len(c.order) > 0 && (len(c.entries) >= maxCachedChecks || c.bytes+n > maxCachedCheckBytes) {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= c.entries[old].bytes
		delete(c.entries, old)
	}
	c.entries[k] = checkEntry{errs: errs, bytes: n}
	c.order = append(c.order, k)
	c.bytes += n
}
