package workflow

import (
	"fmt"
	"strings"
)

// Outcome is the result of applying a batch of operations.
type Outcome struct {
	Definition Definition
	Applied    int
	Skipped    []Skip
}

// maxListed bounds how many names a reason text or an allowed list carries, so that a skip in
// a workflow of a thousand blocks stays readable.
const maxListed = 50

// Apply applies ops to def in order, each on its own: an operation that cannot be applied is
// skipped with a reason and the rest still apply (the repair loop of the seed). def is not
// changed. Whatever ops hold, the result is a sound graph: every edge joins two existing blocks,
// no block id repeats, and there is no cycle.
func (c *Catalog) Apply(def Definition, ops []Op) Outcome {
	b := newBuilder(c, def)
	out := Outcome{}
	for i, op := range ops {
		if skip := b.apply(i, op); skip != nil {
			skip.OperationIndex = i
			skip.OperationType = op.Type
			skip.BlockID = op.BlockID
			out.Skipped = append(out.Skipped, *skip)
			continue
		}
		out.Applied++
	}
	out.Definition = b.definition()
	return out
}

// event is what happened to a block id earlier in the batch, to explain why it is missing now.
type event struct {
	op      int
	removed bool
	code    ReasonCode
}

type edgeKey struct{ from, to string }

type builder struct {
	cat     *Catalog
	blocks  []Block
	index   map[string]int
	edges   []Edge
	edgeSet map[edgeKey]string // → branch
	out     map[string][]string
	history map[string]event
}

func newBuilder(c *Catalog, def Definition) *builder {
	b := &builder{
		cat:     c,
		blocks:  append(make([]Block, 0, len(def.Blocks)), def.Blocks...),
		index:   make(map[string]int, len(def.Blocks)),
		edges:   append(make([]Edge, 0, len(def.Edges)), def.Edges...),
		edgeSet: make(map[edgeKey]string, len(def.Edges)),
		out:     map[string][]string{},
		history: map[string]event{},
	}
	for i, blk := range b.blocks {
		b.index[blk.ID] = i
	}
	for _, e := range b.edges {
		b.edgeSet[edgeKey{e.From, e.To}] = e.Branch
		b.out[e.From] = append(b.out[e.From], e.To)
	}
	return b
}

func (b *builder) definition() Definition {
	return Definition{Blocks: b.blocks, Edges: b.edges}
}

func (b *builder) apply(i int, op Op) *Skip {
	switch OpType(op.Type) {
	case OpAdd:
		return b.add(i, op)
	case OpUpdate:
		return b.update(op)
	case OpRemove:
		return b.remove(i, op)
	case OpConnect:
		return b.connect(op)
	case OpDisconnect:
		return b.disconnect(op)
	default:
		reason := fmt.Sprintf("operation_type %q is not an operation; use one of %s.", op.Type, listOf(opTypes(), 10))
		if op.Type == "" {
			reason = "The operation has no operation_type; use one of " + listOf(opTypes(), 10) + "."
		}
		hint := Hint{DidYouMean: closest(op.Type, opTypes()), Allowed: opTypes(), Pointer: "/operation_type"}
		if hint.DidYouMean != "" {
			reason += fmt.Sprintf(" Did you mean %q?", hint.DidYouMean)
		}
		return &Skip{ReasonCode: ReasonUnknownOperationType, Reason: reason, Hint: hint}
	}
}

// ---------------------------------------------------------------------------------------------
// Blocks

func (b *builder) add(i int, op Op) (skip *Skip) {
	defer func() {
		// Remember the failed add so that a later connect can say why the block is missing.
		if skip != nil && validBlockID(op.BlockID) {
			if _, exists := b.index[op.BlockID]; !exists {
				b.history[op.BlockID] = event{op: i, code: skip.ReasonCode}
			}
		}
	}()
	if !validBlockID(op.BlockID) {
		return invalidBlockID(op.BlockID)
	}
	if j, ok := b.index[op.BlockID]; ok {
		suggestion := b.freeID(op.BlockID)
		return &Skip{ReasonCode: ReasonDuplicateBlockID,
			Reason: fmt.Sprintf("A block %q already exists (type %s). Give the new block another block_id, such as %q, or use \"update\" to change the params of the existing one.",
				op.BlockID, b.blocks[j].Type, suggestion),
			Hint: Hint{DidYouMean: suggestion, Pointer: "/block_id"}}
	}
	conn, ok := b.cat.Lookup(op.BlockType)
	if !ok {
		return b.typeNotRegistered(op.BlockType)
	}
	params := map[string]any{}
	touched := make([]string, 0, len(op.Params))
	for _, k := range sortedKeys(op.Params) {
		touched = append(touched, k)
		if v := op.Params[k]; v != nil {
			params[k] = v
		}
	}
	if v := b.cat.checkParams(conn, params, touched); v != nil {
		return paramSkip(op.BlockID, conn, v)
	}
	b.index[op.BlockID] = len(b.blocks)
	b.blocks = append(b.blocks, Block{ID: op.BlockID, Type: conn.Type(), Params: params})
	delete(b.history, op.BlockID)
	return nil
}

func (b *builder) update(op Op) *Skip {
	j, ok := b.index[op.BlockID]
	if !ok {
		return b.blockNotFound(op.BlockID, "update")
	}
	blk := b.blocks[j]
	conn, ok := b.cat.Lookup(blk.Type)
	if !ok {
		// The stored block's type left the catalog; its params cannot be checked any more.
		return b.typeNotRegistered(blk.Type)
	}
	if !op.HasParams {
		return &Skip{ReasonCode: ReasonInvalidParam,
			Reason: fmt.Sprintf("update of block %q needs params: an object of the params to set (a null value removes a param). Params of %s: %s.",
				op.BlockID, conn.Type(), listOf(conn.public, maxListed)),
			Hint: Hint{Allowed: conn.public, Pointer: "/params"}}
	}
	params := make(map[string]any, len(blk.Params)+len(op.Params))
	for k, v := range blk.Params {
		params[k] = v
	}
	touched := make([]string, 0, len(op.Params))
	for _, k := range sortedKeys(op.Params) {
		touched = append(touched, k)
		if v := op.Params[k]; v == nil {
			delete(params, k)
		} else {
			params[k] = v
		}
	}
	if v := b.cat.checkParams(conn, params, touched); v != nil {
		return paramSkip(op.BlockID, conn, v)
	}
	b.blocks[j] = Block{ID: blk.ID, Type: blk.Type, Params: params}
	return nil
}

func (b *builder) remove(i int, op Op) *Skip {
	j, ok := b.index[op.BlockID]
	if !ok {
		return b.blockNotFound(op.BlockID, "remove")
	}
	b.blocks = append(b.blocks[:j], b.blocks[j+1:]...)
	delete(b.index, op.BlockID)
	for k := j; k < len(b.blocks); k++ {
		b.index[b.blocks[k].ID] = k
	}
	kept := b.edges[:0]
	for _, e := range b.edges {
		if e.From == op.BlockID || e.To == op.BlockID {
			delete(b.edgeSet, edgeKey{e.From, e.To})
			if e.To == op.BlockID {
				b.out[e.From] = without(b.out[e.From], e.To)
			}
			continue
		}
		kept = append(kept, e)
	}
	b.edges = kept
	delete(b.out, op.BlockID)
	b.history[op.BlockID] = event{op: i, removed: true}
	return nil
}

// ---------------------------------------------------------------------------------------------
// Edges

func (b *builder) connect(op Op) *Skip {
	from, to := op.BlockID, op.TargetBlockID
	if _, ok := b.index[from]; !ok {
		return &Skip{ReasonCode: ReasonInvalidEdgeSource,
			Reason: fmt.Sprintf("Cannot connect %q -> %q: the source %s", from, to, b.whyMissing(from, "block_id")),
			Hint:   b.blockHint(from, "/block_id")}
	}
	if _, ok := b.index[to]; !ok {
		return &Skip{ReasonCode: ReasonInvalidEdgeTarget,
			Reason: fmt.Sprintf("Cannot connect %q -> %q: the target %s", from, to, b.whyMissing(to, "target_block_id")),
			Hint:   b.blockHint(to, "/target_block_id")}
	}
	if from == to {
		return &Skip{ReasonCode: ReasonSelfLoop,
			Reason: fmt.Sprintf("Cannot connect block %q to itself: workflows are acyclic. Connect it to another block.", from),
			Hint:   Hint{Pointer: "/target_block_id"}}
	}
	src := b.blocks[b.index[from]]
	branch := ""
	if op.Branch != nil {
		branch = *op.Branch
	}
	if skip := b.checkBranch(src, op.Branch); skip != nil {
		return skip
	}
	if existing, ok := b.edgeSet[edgeKey{from, to}]; ok {
		reason := fmt.Sprintf("The edge %q -> %q already exists; nothing to do.", from, to)
		if existing != branch {
			reason = fmt.Sprintf("The edge %q -> %q already exists with branch %q. To change its branch, disconnect it first, then connect again.", from, to, existing)
		}
		return &Skip{ReasonCode: ReasonDuplicateEdge, Reason: reason, Hint: Hint{Pointer: "/target_block_id"}}
	}
	if path := b.path(to, from); path != nil {
		return &Skip{ReasonCode: ReasonEdgeCreatesCycle,
			Reason: fmt.Sprintf("Connecting %q -> %q would create a cycle: %q already leads to %q (%s). Workflows are acyclic; connect to a block that does not lead back to %q.",
				from, to, to, from, strings.Join(path, " -> "), from),
			Hint: Hint{Pointer: "/target_block_id"}}
	}
	b.edges = append(b.edges, Edge{From: from, To: to, Branch: branch})
	b.edgeSet[edgeKey{from, to}] = branch
	b.out[from] = append(b.out[from], to)
	return nil
}

func (b *builder) checkBranch(src Block, branch *string) *Skip {
	conn, known := b.cat.Lookup(src.Type)
	allowed := []string{"true", "false"}
	switch {
	case known && conn.branches() && branch == nil:
		return &Skip{ReasonCode: ReasonInvalidBranch,
			Reason: fmt.Sprintf("Edges leaving condition block %q need a branch: \"true\" or \"false\" (the edge is taken when the condition's result matches).", src.ID),
			Hint:   Hint{Allowed: allowed, Pointer: "/branch"}}
	case known && conn.branches() && *branch != "true" && *branch != "false":
		hint := Hint{Allowed: allowed, Pointer: "/branch"}
		switch strings.ToLower(*branch) {
		case "true", "yes", "1", "then":
			hint.DidYouMean = "true"
		case "false", "no", "0", "else":
			hint.DidYouMean = "false"
		}
		return &Skip{ReasonCode: ReasonInvalidBranch,
			Reason: fmt.Sprintf("branch must be the string \"true\" or \"false\", not %q.", *branch), Hint: hint}
	case (!known || !conn.branches()) && branch != nil:
		return &Skip{ReasonCode: ReasonInvalidBranch,
			Reason: fmt.Sprintf("Only edges leaving a condition block carry a branch; %q is a %s block. Send the connect without branch.", src.ID, src.Type),
			Hint:   Hint{Pointer: "/branch"}}
	}
	return nil
}

func (b *builder) disconnect(op Op) *Skip {
	from, to := op.BlockID, op.TargetBlockID
	if _, ok := b.edgeSet[edgeKey{from, to}]; !ok {
		targets := b.out[from]
		reason := fmt.Sprintf("No edge %q -> %q exists.", from, to)
		hint := Hint{Pointer: "/target_block_id"}
		switch _, exists := b.index[from]; {
		case !exists:
			reason += " The source " + b.whyMissing(from, "block_id")
			hint = b.blockHint(from, "/block_id")
		case len(targets) == 0:
			reason += fmt.Sprintf(" Block %q has no outgoing edges.", from)
		default:
			reason += fmt.Sprintf(" Edges leaving %q go to %s.", from, listOf(targets, maxListed))
			hint.DidYouMean = closest(to, targets)
			hint.Allowed = capped(targets)
		}
		return &Skip{ReasonCode: ReasonEdgeNotFound, Reason: reason, Hint: hint}
	}
	for k, e := range b.edges {
		if e.From == from && e.To == to {
			b.edges = append(b.edges[:k], b.edges[k+1:]...)
			break
		}
	}
	delete(b.edgeSet, edgeKey{from, to})
	b.out[from] = without(b.out[from], to)
	return nil
}

// path returns a path of edges from -> ... -> to, or nil when to cannot be reached.
func (b *builder) path(from, to string) []string {
	parent := map[string]string{from: ""}
	stack := []string{from}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == to {
			var p []string
			for cur := to; cur != ""; cur = parent[cur] {
				p = append(p, cur)
				if cur == from {
					break
				}
			}
			for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
				p[i], p[j] = p[j], p[i]
			}
			return p
		}
		for _, next := range b.out[n] {
			if _, seen := parent[next]; !seen {
				parent[next] = n
				stack = append(stack, next)
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// Reasons

// whyMissing completes "the source ..." or "the target ...": the block id, and whether it never
// existed, was removed earlier in this batch, or was never added because its add was skipped.
func (b *builder) whyMissing(id, field string) string {
	if id == "" {
		return fmt.Sprintf("is missing: set %s to the id of an existing block.", field)
	}
	ev, ok := b.history[id]
	switch {
	case ok && ev.removed:
		return fmt.Sprintf("block %q was removed by operation %d of this batch.", id, ev.op)
	case ok:
		return fmt.Sprintf("block %q does not exist because the operation that would have added it (operation %d of this batch) was skipped with %s. Fix that operation, then send both again: skipped operations are not kept.",
			id, ev.op, ev.code)
	}
	msg := fmt.Sprintf("block %q never existed: it is not in the workflow and no earlier operation of this batch added it.", id)
	return msg + b.existingText(id)
}

func (b *builder) blockNotFound(id, verb string) *Skip {
	reason := fmt.Sprintf("Cannot %s block %q: ", verb, id)
	if id == "" {
		reason = fmt.Sprintf("%s needs a block_id: the id of an existing block.", verb)
		reason += b.existingText(id)
	} else {
		reason += b.whyMissing(id, "block_id")
	}
	return &Skip{ReasonCode: ReasonBlockNotFound, Reason: reason, Hint: b.blockHint(id, "/block_id")}
}

func (b *builder) existingText(id string) string {
	ids := b.ids()
	if len(ids) == 0 {
		return " The workflow has no blocks yet; add one first."
	}
	text := fmt.Sprintf(" Existing blocks: %s.", listOf(ids, maxListed))
	if dym := closest(id, ids); dym != "" {
		text += fmt.Sprintf(" Did you mean %q?", dym)
	}
	return text
}

func (b *builder) blockHint(id, pointer string) Hint {
	ids := b.ids()
	return Hint{DidYouMean: closest(id, ids), Allowed: capped(ids), Pointer: pointer}
}

func (b *builder) ids() []string {
	ids := make([]string, len(b.blocks))
	for i, blk := range b.blocks {
		ids[i] = blk.ID
	}
	return ids
}

func (b *builder) typeNotRegistered(t string) *Skip {
	types := b.cat.Types()
	dym := closest(t, types)
	reason := fmt.Sprintf("Block type %q is not registered.", t)
	if t == "" {
		reason = "add needs a type: a registered block type."
	}
	if dym != "" {
		reason += fmt.Sprintf(" Did you mean %q?", dym)
	}
	reason += fmt.Sprintf(" Registered types: %s. GET /api/connectors lists each with its params.", listOf(types, maxListed))
	return &Skip{ReasonCode: ReasonBlockTypeNotRegistered, Reason: reason,
		Hint: Hint{DidYouMean: dym, Allowed: types, Pointer: "/type"}}
}

// freeID suggests an unused block id close to id.
func (b *builder) freeID(id string) string {
	base := id
	if len(base) > 60 {
		base = base[:60]
	}
	for n := 2; ; n++ {
		cand := fmt.Sprintf("%s_%d", base, n)
		if _, taken := b.index[cand]; !taken {
			return cand
		}
	}
}

func paramSkip(blockID string, conn *Connector, v *paramViolation) *Skip {
	pointer := "/params" + v.pointer
	switch v.code {
	case ReasonHiddenParam:
		return &Skip{ReasonCode: ReasonHiddenParam,
			Reason: fmt.Sprintf("Param %q of %s is hidden: only the server's configuration sets it, never a client. Remove it from params. Params you can set: %s.",
				v.name, conn.Type(), listOf(conn.public, maxListed)),
			Hint: Hint{Allowed: conn.public, Pointer: pointer}}
	case ReasonUnknownParam:
		reason := fmt.Sprintf("%s has no param %q.", conn.Type(), v.name)
		if v.hint.DidYouMean != "" {
			reason += fmt.Sprintf(" Did you mean %q?", v.hint.DidYouMean)
		}
		if len(conn.public) == 0 {
			reason += fmt.Sprintf(" %s takes no params; send params {} or leave it out.", conn.Type())
		} else {
			reason += fmt.Sprintf(" Its params are: %s.", listOf(conn.public, maxListed))
		}
		v.hint.Pointer = pointer
		return &Skip{ReasonCode: ReasonUnknownParam, Reason: reason, Hint: v.hint}
	default:
		reason := fmt.Sprintf("Param %q of block %q (%s) is invalid at %s: %s (rule: %s).", v.name, blockID, conn.Type(), pointer, v.detail, v.rule)
		if v.name == "" {
			reason = fmt.Sprintf("The params of block %q (%s) are invalid: %s (rule: %s).", blockID, conn.Type(), v.detail, v.rule)
		}
		if len(v.hint.Allowed) > 0 {
			reason += fmt.Sprintf(" Allowed: %s.", listOf(v.hint.Allowed, maxListed))
		}
		reason += " GET /api/connectors shows the param's schema."
		v.hint.Pointer = pointer
		return &Skip{ReasonCode: ReasonInvalidParam, Reason: reason, Hint: v.hint}
	}
}

func invalidBlockID(id string) *Skip {
	reason := "add needs a block_id: 1 to 64 letters, digits, \"_\" or \"-\"."
	hint := Hint{Pointer: "/block_id"}
	if id != "" {
		reason = fmt.Sprintf("block_id %q is invalid: it must be 1 to 64 letters, digits, \"_\" or \"-\" (^[A-Za-z0-9_-]{1,64}$).", id)
		if s := sanitizeID(id); s != "" {
			hint.DidYouMean = s
			reason += fmt.Sprintf(" Did you mean %q?", s)
		}
	}
	return &Skip{ReasonCode: ReasonInvalidBlockID, Reason: reason, Hint: hint}
}

func validBlockID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// sanitizeID turns an invalid id into the valid one a model most likely meant.
func sanitizeID(id string) string {
	var s strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			s.WriteRune(r)
		case r == ' ', r == '.', r == '/', r == ':':
			s.WriteByte('_')
		}
		if s.Len() == 64 {
			break
		}
	}
	out := strings.Trim(s.String(), "_")
	if !validBlockID(out) {
		return ""
	}
	return out
}

func without(list []string, v string) []string {
	for i, x := range list {
		if x == v {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

func capped(list []string) []string {
	if len(list) > maxListed {
		return nil
	}
	return list
}
