package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"svc.dev/services/workflow-editor/internal/domain/repair"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// maxListed bounds how many names a reason text or an allowed list carries, so that a skip in
// a workflow of a thousand blocks stays readable.
const maxListed = 50

// Apply applies ops to def in order, each on its own: an operation that cannot be applied is
// skipped with a reason and the rest still apply (the repair loop of the seed). def is not
// changed. Whatever ops hold, the result is a sound graph: every edge joins two existing blocks,
// no block id repeats, and there is no cycle.
func (c *Catalog) Apply(def workflow.Definition, ops []workflow.Op) workflow.Outcome {
	out, _ := c.apply(def, ops)
	return out
}

func (c *Catalog) apply(def workflow.Definition, ops []workflow.Op) (workflow.Outcome, *builder) {
	b := newBuilder(c, def)
	out := workflow.Outcome{}
	for i, op := range ops {
		b.skipIndex = len(out.Skipped)
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
	return out, b
}

// event is what happened to a block id earlier in the batch, to explain why it is missing now.
type event struct {
	op      int
	removed bool
	code    workflow.ReasonCode
}

type edgeKey struct{ from, to string }

type builder struct {
	cat     *Catalog
	blocks  []workflow.Block
	index   map[string]int
	edges   []workflow.Edge
	edgeSet map[edgeKey]string // → branch
	out     map[string][]string
	history map[string]event

	// skipIndex is the index in Outcome.Skipped that the operation being applied gets if it is
	// skipped, so that a reason can point at an earlier one instead of repeating it.
	skipIndex int
	// blocksGen changes whenever the set of block ids does, graphGen whenever blocks or edges
	// do: what was said about the graph in an earlier skip holds while they stay the same.
	blocksGen, graphGen int

	sug      *repair.Suggester
	norms    []repair.Normalized // the blocks' ids as the suggester compares them; nil until a guess
	guesses  map[string]string   // missing block id → did_you_mean, for blocksGen
	guessGen int
	idList   []string // block ids, for idsGen
	idsGen   int
	listed   map[string]listing // what a reason text listed: "blocks", "edges from <id>"

	// size is the definition's JSON size in bytes, or -1 until an add or an update needs it;
	// sizes holds each block's share, by block index.
	size  int
	sizes []int
}

// listing is a list of names that skip number skip already gave, while the graph was at gen.
type listing struct{ gen, skip int }

func newBuilder(c *Catalog, def workflow.Definition) *builder {
	b := &builder{
		cat:     c,
		blocks:  append(make([]workflow.Block, 0, len(def.Blocks)), def.Blocks...),
		index:   make(map[string]int, len(def.Blocks)),
		edges:   append(make([]workflow.Edge, 0, len(def.Edges)), def.Edges...),
		edgeSet: make(map[edgeKey]string, len(def.Edges)),
		out:     map[string][]string{},
		history: map[string]event{},
		sug:     repair.NewSuggester(),
		guesses: map[string]string{},
		idsGen:  -1,
		listed:  map[string]listing{},
		size:    -1,
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

func (b *builder) definition() workflow.Definition {
	return workflow.Definition{Blocks: b.blocks, Edges: b.edges}
}

func (b *builder) apply(i int, op workflow.Op) *workflow.Skip {
	switch workflow.OpType(op.Type) {
	case workflow.OpAdd:
		return b.add(i, op)
	case workflow.OpUpdate:
		return b.update(op)
	case workflow.OpRemove:
		return b.remove(i, op)
	case workflow.OpConnect:
		return b.connect(op)
	case workflow.OpDisconnect:
		return b.disconnect(op)
	default:
		reason := fmt.Sprintf("operation_type %q is not an operation; use one of %s.", op.Type, listOf(workflow.OpTypes(), 10))
		if op.Type == "" {
			reason = "The operation has no operation_type; use one of " + listOf(workflow.OpTypes(), 10) + "."
		}
		hint := workflow.Hint{DidYouMean: opSynonym(op.Type), Allowed: workflow.OpTypes(), Pointer: "/operation_type"}
		if hint.DidYouMean == "" {
			hint.DidYouMean = repair.Closest(op.Type, workflow.OpTypes())
		}
		if hint.DidYouMean != "" {
			reason += fmt.Sprintf(" Did you mean %q?", hint.DidYouMean)
		}
		return &workflow.Skip{ReasonCode: workflow.ReasonUnknownOperationType, Reason: reason, Hint: hint}
	}
}

// opSynonym maps the names models use for the operations, from other APIs and from plain
// English, onto this API's.
func opSynonym(t string) string {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "create", "insert", "new", "add_block", "addblock":
		return string(workflow.OpAdd)
	case "set", "edit", "modify", "change", "patch", "update_block", "updateblock", "update_params":
		return string(workflow.OpUpdate)
	case "delete", "del", "rm", "drop", "remove_block", "removeblock", "delete_block", "deleteblock":
		return string(workflow.OpRemove)
	case "link", "edge", "add_edge", "addedge", "wire", "attach":
		return string(workflow.OpConnect)
	case "unlink", "remove_edge", "removeedge", "delete_edge", "deleteedge", "detach", "unwire":
		return string(workflow.OpDisconnect)
	}
	return ""
}

// ---------------------------------------------------------------------------------------------
// Blocks

func (b *builder) add(i int, op workflow.Op) (skip *workflow.Skip) {
	defer func() {
		// Remember the failed add so that a later connect can say why the block is missing.
		if skip != nil && op.BlockID != "" && len(op.BlockID) <= 4*repair.MaxCompared {
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
		other := "another block_id"
		if suggestion != "" {
			other += fmt.Sprintf(", such as %q", suggestion)
		}
		return &workflow.Skip{ReasonCode: workflow.ReasonDuplicateBlockID,
			Reason: fmt.Sprintf("A block %q already exists (type %s). Give the new block %s, or use \"update\" to change the params of the existing one.",
				op.BlockID, b.blocks[j].Type, other),
			Hint: workflow.Hint{DidYouMean: suggestion, Pointer: "/block_id"}}
	}
	if len(b.blocks) >= workflow.MaxBlocks {
		return &workflow.Skip{ReasonCode: workflow.ReasonWorkflowTooLarge,
			Reason: fmt.Sprintf("The workflow already has %d blocks, the most a workflow may have. Remove blocks it no longer needs, or split the work into several workflows.", len(b.blocks)),
			Hint:   workflow.Hint{Pointer: "/block_id"}}
	}
	conn, ok := b.cat.Lookup(op.BlockType)
	if !ok {
		return b.typeNotRegisteredAdd(op)
	}
	params := map[string]any{}
	touched := make([]string, 0, len(op.Params))
	for _, k := range sortedKeys(op.Params) {
		touched = append(touched, k)
		if v := op.Params[k]; v != nil {
			params[k] = v
		}
	}
	if vs := b.cat.checkParams(conn, params, touched, nil); len(vs) > 0 {
		return paramSkip(op.BlockID, conn, vs)
	}
	blk := workflow.Block{ID: op.BlockID, Type: conn.Type(), Params: params}
	if skip := b.resize(blk, -1); skip != nil {
		return skip
	}
	b.index[op.BlockID] = len(b.blocks)
	b.blocks = append(b.blocks, blk)
	if b.norms != nil {
		b.norms = append(b.norms, repair.NormalizeFor(blk.ID))
	}
	delete(b.history, op.BlockID)
	b.blocksGen++
	b.graphGen++
	return nil
}

func (b *builder) update(op workflow.Op) *workflow.Skip {
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
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidParam,
			Reason: fmt.Sprintf("update of block %q needs params: an object of the params to set (a null value removes a param). Params of %s: %s.",
				op.BlockID, conn.Type(), listOf(conn.public, maxListed)),
			Hint: workflow.Hint{Allowed: conn.public, Pointer: "/params"}}
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
	if vs := b.cat.checkParams(conn, params, touched, blk.Params); len(vs) > 0 {
		return paramSkip(op.BlockID, conn, vs)
	}
	updated := workflow.Block{ID: blk.ID, Type: blk.Type, Params: params}
	if skip := b.resize(updated, j); skip != nil {
		return skip
	}
	b.blocks[j] = updated
	return nil
}

func (b *builder) remove(i int, op workflow.Op) *workflow.Skip {
	j, ok := b.index[op.BlockID]
	if !ok {
		return b.blockNotFound(op.BlockID, "remove")
	}
	if b.size >= 0 {
		b.size -= b.sizes[j]
		b.sizes = append(b.sizes[:j], b.sizes[j+1:]...)
	}
	b.blocks = append(b.blocks[:j], b.blocks[j+1:]...)
	if b.norms != nil {
		b.norms = append(b.norms[:j], b.norms[j+1:]...)
	}
	delete(b.index, op.BlockID)
	for k := j; k < len(b.blocks); k++ {
		b.index[b.blocks[k].ID] = k
	}
	kept := b.edges[:0]
	for _, e := range b.edges {
		if e.From == op.BlockID || e.To == op.BlockID {
			if b.size >= 0 {
				b.size -= edgeSize(e)
			}
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
	b.blocksGen++
	b.graphGen++
	return nil
}

// ---------------------------------------------------------------------------------------------
// Edges

func (b *builder) connect(op workflow.Op) *workflow.Skip {
	from, to := op.BlockID, op.TargetBlockID
	if _, ok := b.index[from]; !ok {
		why, hint := b.missing(from, "block_id", "/block_id")
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidEdgeSource,
			Reason: fmt.Sprintf("Cannot connect %s -> %s: the source %s", quoteID(from), quoteID(to), why), Hint: hint}
	}
	if _, ok := b.index[to]; !ok {
		why, hint := b.missing(to, "target_block_id", "/target_block_id")
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidEdgeTarget,
			Reason: fmt.Sprintf("Cannot connect %s -> %s: the target %s", quoteID(from), quoteID(to), why), Hint: hint}
	}
	if from == to {
		return &workflow.Skip{ReasonCode: workflow.ReasonSelfLoop,
			Reason: fmt.Sprintf("Cannot connect block %q to itself: workflows are acyclic. Connect it to another block.", from),
			Hint:   workflow.Hint{Pointer: "/target_block_id"}}
	}
	src := b.blocks[b.index[from]]
	branch := ""
	if op.Branch != nil {
		branch = *op.Branch
	}
	if op.BranchJSON != nil {
		return b.branchNotString(src, *op.BranchJSON)
	}
	if skip := b.checkBranch(src, op.Branch); skip != nil {
		return skip
	}
	if existing, ok := b.edgeSet[edgeKey{from, to}]; ok {
		reason := fmt.Sprintf("The edge %q -> %q already exists; nothing to do.", from, to)
		if existing != branch {
			reason = fmt.Sprintf("The edge %q -> %q already exists with branch %q. To change its branch, disconnect it first, then connect again.", from, to, existing)
		}
		return &workflow.Skip{ReasonCode: workflow.ReasonDuplicateEdge, Reason: reason, Hint: workflow.Hint{Pointer: "/target_block_id"}}
	}
	if len(b.edges) >= workflow.MaxEdges {
		return &workflow.Skip{ReasonCode: workflow.ReasonWorkflowTooLarge,
			Reason: fmt.Sprintf("The workflow already has %d edges, the most a workflow may have. Disconnect edges it no longer needs, or split the work into several workflows.", len(b.edges)),
			Hint:   workflow.Hint{Pointer: "/target_block_id"}}
	}
	if path := b.path(to, from); path != nil {
		return &workflow.Skip{ReasonCode: workflow.ReasonEdgeCreatesCycle,
			Reason: fmt.Sprintf("Connecting %q -> %q would create a cycle: %q already leads to %q (%s). Workflows are acyclic; connect to a block that does not lead back to %q.",
				from, to, to, from, showPath(path), from),
			Hint: workflow.Hint{Pointer: "/target_block_id"}}
	}
	e := workflow.Edge{From: from, To: to, Branch: branch}
	if b.size >= 0 {
		b.size += edgeSize(e)
	}
	b.edges = append(b.edges, e)
	b.edgeSet[edgeKey{from, to}] = branch
	b.out[from] = append(b.out[from], to)
	b.graphGen++
	return nil
}

// branchNotString is the skip of a connect whose branch is a JSON value other than a string.
func (b *builder) branchNotString(src workflow.Block, raw string) *workflow.Skip {
	shown := truncate(raw, 40)
	if conn, known := b.cat.Lookup(src.Type); !known || !conn.branches() {
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidBranch,
			Reason: fmt.Sprintf("Only edges leaving a condition block carry a branch; %q is a %s block. Send the connect without branch (not %s).", src.ID, src.Type, shown),
			Hint:   workflow.Hint{Pointer: "/branch"}}
	}
	hint := workflow.Hint{Allowed: []string{"true", "false"}, Pointer: "/branch"}
	switch raw {
	case "true", "1":
		hint.DidYouMean = "true"
	case "false", "0":
		hint.DidYouMean = "false"
	}
	reason := fmt.Sprintf("branch must be the string \"true\" or \"false\", not the JSON value %s.", shown)
	if hint.DidYouMean != "" {
		reason += fmt.Sprintf(" Did you mean %q (a string)?", hint.DidYouMean)
	}
	return &workflow.Skip{ReasonCode: workflow.ReasonInvalidBranch, Reason: reason, Hint: hint}
}

func (b *builder) checkBranch(src workflow.Block, branch *string) *workflow.Skip {
	conn, known := b.cat.Lookup(src.Type)
	allowed := []string{"true", "false"}
	switch {
	case known && conn.branches() && branch == nil:
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidBranch,
			Reason: fmt.Sprintf("Edges leaving condition block %q need a branch: \"true\" or \"false\" (the edge is taken when the condition's result matches).", src.ID),
			Hint:   workflow.Hint{Allowed: allowed, Pointer: "/branch"}}
	case known && conn.branches() && *branch != "true" && *branch != "false":
		hint := workflow.Hint{Allowed: allowed, Pointer: "/branch"}
		switch strings.ToLower(strings.TrimSpace(*branch)) {
		case "true", "yes", "1", "then":
			hint.DidYouMean = "true"
		case "false", "no", "0", "else":
			hint.DidYouMean = "false"
		}
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidBranch,
			Reason: fmt.Sprintf("branch must be the string \"true\" or \"false\", not %q.", *branch), Hint: hint}
	case (!known || !conn.branches()) && branch != nil:
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidBranch,
			Reason: fmt.Sprintf("Only edges leaving a condition block carry a branch; %q is a %s block. Send the connect without branch.", src.ID, src.Type),
			Hint:   workflow.Hint{Pointer: "/branch"}}
	}
	return nil
}

func (b *builder) disconnect(op workflow.Op) *workflow.Skip {
	from, to := op.BlockID, op.TargetBlockID
	if _, ok := b.edgeSet[edgeKey{from, to}]; !ok {
		targets := b.out[from]
		reason := fmt.Sprintf("No edge %s -> %s exists.", quoteID(from), quoteID(to))
		hint := workflow.Hint{Pointer: "/target_block_id"}
		switch _, exists := b.index[from]; {
		case !exists:
			var why string
			why, hint = b.missing(from, "block_id", "/block_id")
			reason += " The source " + why
		case len(targets) == 0:
			reason += fmt.Sprintf(" Block %q has no outgoing edges.", from)
		default:
			hint.DidYouMean = b.sug.Closest(to, targets)
			if k, ok := b.said("edges from "+from, b.graphGen); ok {
				reason += fmt.Sprintf(" skipped_items[%d] lists the edges leaving %q.", k, from)
			} else {
				reason += fmt.Sprintf(" Edges leaving %q go to %s.", from, listOf(targets, maxListed))
				hint.Allowed = capped(targets)
			}
			if hint.DidYouMean != "" {
				reason += fmt.Sprintf(" Did you mean %q?", hint.DidYouMean)
			}
		}
		return &workflow.Skip{ReasonCode: workflow.ReasonEdgeNotFound, Reason: reason, Hint: hint}
	}
	for k, e := range b.edges {
		if e.From == from && e.To == to {
			if b.size >= 0 {
				b.size -= edgeSize(e)
			}
			b.edges = append(b.edges[:k], b.edges[k+1:]...)
			break
		}
	}
	delete(b.edgeSet, edgeKey{from, to})
	b.out[from] = without(b.out[from], to)
	b.graphGen++
	return nil
}

// path returns a shortest path of edges from -> ... -> to, or nil when to cannot be reached.
func (b *builder) path(from, to string) []string {
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
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
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// showPath writes a path for a reason text; a long one keeps its ends, so that the text stays
// short whatever the workflow.
func showPath(path []string) string {
	const ends = 4
	if len(path) <= 2*ends+1 {
		return strings.Join(path, " -> ")
	}
	return fmt.Sprintf("%s -> … %d more … -> %s", strings.Join(path[:ends], " -> "), len(path)-2*ends, strings.Join(path[len(path)-ends:], " -> "))
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
	return fmt.Sprintf("block %s never existed: it is not in the workflow and no earlier operation of this batch added it.", quoteID(id))
}

// missing is why a block id is missing, followed by the existing blocks, with the hint. The
// guess is made once per id while the set of blocks stays the same, and the existing blocks
// are listed by the first such skip only (later ones point at it): 500 skips in a workflow
// of 2,000 blocks cost milliseconds and kilobytes, not seconds and megabytes.
func (b *builder) missing(id, field, pointer string) (string, workflow.Hint) {
	if ev, ok := b.history[id]; ok && !ev.removed {
		// The block is missing because its add was skipped: the repair is that add's, and a
		// guess among the other blocks would connect the wrong one. An id refused as invalid
		// is named here as that add's hint names it.
		hint := workflow.Hint{Pointer: pointer}
		if ev.code == workflow.ReasonInvalidBlockID {
			hint.DidYouMean = sanitizeID(id)
		}
		return b.whyMissing(id, field), hint
	}
	text, hint := b.existing(id, pointer)
	return b.whyMissing(id, field) + text, hint
}

func (b *builder) existing(id, pointer string) (string, workflow.Hint) {
	hint := workflow.Hint{Pointer: pointer, DidYouMean: b.guess(id)}
	ids := b.ids()
	var text string
	switch k, said := b.said("blocks", b.blocksGen); {
	case len(ids) == 0:
		text = " The workflow has no blocks yet; add one first."
	case said:
		text = fmt.Sprintf(" skipped_items[%d] lists the existing blocks.", k)
	default:
		text = fmt.Sprintf(" Existing blocks: %s.", listOf(ids, maxListed))
		hint.Allowed = capped(ids)
	}
	if hint.DidYouMean != "" {
		text += fmt.Sprintf(" Did you mean %q?", hint.DidYouMean)
	}
	return text, hint
}

func (b *builder) blockNotFound(id, verb string) *workflow.Skip {
	if id == "" {
		text, hint := b.existing(id, "/block_id")
		return &workflow.Skip{ReasonCode: workflow.ReasonBlockNotFound, Reason: fmt.Sprintf("%s needs a block_id: the id of an existing block.", verb) + text, Hint: hint}
	}
	why, hint := b.missing(id, "block_id", "/block_id")
	return &workflow.Skip{ReasonCode: workflow.ReasonBlockNotFound, Reason: fmt.Sprintf("Cannot %s block %s: %s", verb, quoteID(id), why), Hint: hint}
}

// said returns the skip that already listed key while the graph was at gen. When none did, it
// records that the skip of the operation being applied lists it, and returns false.
func (b *builder) said(key string, gen int) (int, bool) {
	if l, ok := b.listed[key]; ok && l.gen == gen {
		return l.skip, true
	}
	b.listed[key] = listing{gen: gen, skip: b.skipIndex}
	return 0, false
}

// guess is the existing block id closest to id, made once per id while the blocks stay the same.
func (b *builder) guess(id string) string {
	if id == "" {
		return ""
	}
	if b.guessGen != b.blocksGen {
		clear(b.guesses)
		b.guessGen = b.blocksGen
	}
	if g, ok := b.guesses[id]; ok {
		return g
	}
	if b.norms == nil {
		b.norms = make([]repair.Normalized, len(b.blocks), max(len(b.blocks), 16))
		for i, blk := range b.blocks {
			b.norms[i] = repair.NormalizeFor(blk.ID)
		}
	}
	g := b.sug.Pick(id, len(b.blocks), func(i int) (string, repair.Normalized) { return b.blocks[i].ID, b.norms[i] }, -1)
	b.guesses[id] = g
	return g
}

// ids lists the block ids in order. The slice is rebuilt, never changed, when blocks come or go:
// hints of earlier skips may hold it.
func (b *builder) ids() []string {
	if b.idsGen == b.blocksGen {
		return b.idList
	}
	ids := make([]string, len(b.blocks))
	for i, blk := range b.blocks {
		ids[i] = blk.ID
	}
	b.idList, b.idsGen = ids, b.blocksGen
	return ids
}

// quoteID quotes a block id for a reason text. An overlong one, which is never a valid id, is
// cut, so that a reason does not repeat a huge input.
func quoteID(id string) string {
	if len(id) > 2*repair.MaxCompared {
		id = truncate(id, repair.MaxCompared)
	}
	return fmt.Sprintf("%q", id)
}

// resize keeps the definition under MaxDefinitionBytes: blk is added (replaces < 0), or
// replaces block number replaces. The sizes are measured on the first add or update of a batch.
func (b *builder) resize(blk workflow.Block, replaces int) *workflow.Skip {
	if b.size < 0 {
		b.size = len(`{"blocks":[],"edges":[]}`)
		b.sizes = make([]int, len(b.blocks), len(b.blocks)+16)
		for i, old := range b.blocks {
			b.sizes[i] = blockSize(old)
			b.size += b.sizes[i]
		}
		for _, e := range b.edges {
			b.size += edgeSize(e)
		}
	}
	n := blockSize(blk)
	after := b.size + n
	if replaces >= 0 {
		after -= b.sizes[replaces]
	}
	if after > workflow.MaxDefinitionBytes {
		return &workflow.Skip{ReasonCode: workflow.ReasonWorkflowTooLarge,
			Reason: fmt.Sprintf("With this operation the workflow's definition would be %d bytes, more than the %d (%d MiB) a workflow may have; block %q alone is %d bytes. Keep large data out of params: have a step fetch it at run time (http.request), or split the work into several workflows.",
				after, workflow.MaxDefinitionBytes, workflow.MaxDefinitionBytes>>20, blk.ID, n),
			Hint: workflow.Hint{Pointer: "/params"}}
	}
	b.size = after
	if replaces >= 0 {
		b.sizes[replaces] = n
	} else {
		b.sizes = append(b.sizes, n)
	}
	return nil
}

// blockSize is the bytes a block takes in the stored definition, with its comma:
// {"block_id":…,"type":…,"params":…},
func blockSize(blk workflow.Block) int {
	n := len(`{"block_id":,"type":,"params":},`) + stringSize(blk.ID) + stringSize(blk.Type)
	if blk.Params == nil {
		return n + len(`{}`)
	}
	return n + valueSize(blk.Params)
}

// edgeSize is the bytes an edge takes in the stored definition, with its comma:
// {"block_id":…,"target_block_id":…,"branch":…},
func edgeSize(e workflow.Edge) int {
	n := len(`{"block_id":,"target_block_id":},`) + stringSize(e.From) + stringSize(e.To)
	if e.Branch != "" {
		n += len(`,"branch":`) + stringSize(e.Branch)
	}
	return n
}

// valueSize is the length of v's JSON as Definition.MarshalJSON writes it, counted without
// writing it: measuring every block of a large workflow must cost far less than the patch.
func valueSize(v any) int {
	switch x := v.(type) {
	case nil:
		return len("null")
	case bool:
		if x {
			return len("true")
		}
		return len("false")
	case string:
		return stringSize(x)
	case json.Number:
		return len(x)
	case map[string]any:
		n := 2 + max(0, len(x)-1) // braces and commas
		for k, e := range x {
			n += stringSize(k) + 1 + valueSize(e)
		}
		return n
	case []any:
		n := 2 + max(0, len(x)-1)
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	}
	return encodedSize(v)
}

// stringSize is the length of s as a JSON string written by encoding/json without HTML
// escaping: quotes, \" \\ and \n-style escapes, \u00XX for other control characters, and
// \ufffd for each invalid UTF-8 byte; U+2028 and U+2029 are escaped too.
func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// encodedSize measures a value of a type valueSize does not know by encoding it.
func encodedSize(v any) int {
	var cw countingWriter
	enc := json.NewEncoder(&cw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Not storable at all; the param checks refuse such values before they get here.
		return workflow.MaxDefinitionBytes + 1
	}
	return cw.n - 1 // the encoder's newline
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

// typeNotRegisteredAdd is the skip of an add whose type is not registered. When the type meant
// is clear, the params are checked against it too, so that one reply says everything the add
// needs.
func (b *builder) typeNotRegisteredAdd(op workflow.Op) *workflow.Skip {
	skip := b.typeNotRegistered(op.BlockType)
	conn, ok := b.cat.Lookup(skip.Hint.DidYouMean)
	if !ok {
		return skip
	}
	params := map[string]any{}
	touched := make([]string, 0, len(op.Params))
	for _, k := range sortedKeys(op.Params) {
		touched = append(touched, k)
		if v := op.Params[k]; v != nil {
			params[k] = v
		}
	}
	vs := b.cat.checkParams(conn, params, touched, nil)
	if len(vs) == 0 {
		return skip
	}
	rest := paramSkip(op.BlockID, conn, vs)
	skip.Problems = append([]workflow.Problem{{ReasonCode: skip.ReasonCode, Reason: skip.Reason, Hint: skip.Hint}}, rest.AllProblems()...)
	return skip
}

func (b *builder) typeNotRegistered(t string) *workflow.Skip {
	types := b.cat.Types()
	dym := b.cat.suggestType(t)
	reason := fmt.Sprintf("Block type %q is not registered.", t)
	if t == "" {
		reason = "add needs a type: a registered block type."
	}
	if dym != "" {
		reason += fmt.Sprintf(" Did you mean %q?", dym)
	}
	reason += fmt.Sprintf(" Registered types: %s. GET /api/connectors lists each with its params.", listOf(types, maxListed))
	return &workflow.Skip{ReasonCode: workflow.ReasonBlockTypeNotRegistered, Reason: reason,
		Hint: workflow.Hint{DidYouMean: dym, Allowed: types, Pointer: "/type"}}
}

// freeID suggests an unused block id close to id.
func (b *builder) freeID(id string) string {
	base := id
	if len(base) > 60 {
		base = base[:60]
	}
	// A bounded search: a batch of duplicates in a workflow full of id_2, id_3, ... must not
	// cost thousands of tries per operation.
	for n := 2; n < 100; n++ {
		cand := fmt.Sprintf("%s_%d", base, n)
		if _, taken := b.index[cand]; !taken {
			return cand
		}
	}
	return ""
}

// paramSkip is the skip of params with the problems vs: the first names the skip, and every
// one is listed in Problems when there are several.
func paramSkip(blockID string, conn *Connector, vs []*paramViolation) *workflow.Skip {
	skip := paramProblem(blockID, conn, vs[0])
	if len(vs) > 1 {
		for _, v := range vs {
			p := paramProblem(blockID, conn, v)
			skip.Problems = append(skip.Problems, workflow.Problem{ReasonCode: p.ReasonCode, Reason: p.Reason, Hint: p.Hint})
		}
	}
	return skip
}

func paramProblem(blockID string, conn *Connector, v *paramViolation) *workflow.Skip {
	pointer := "/params" + v.pointer
	switch v.code {
	case workflow.ReasonHiddenParam:
		return &workflow.Skip{ReasonCode: workflow.ReasonHiddenParam,
			Reason: fmt.Sprintf("Param %q of %s is hidden: only the server's configuration sets it, never a client. Remove it from params. Params you can set: %s.",
				v.name, conn.Type(), listOf(conn.public, maxListed)),
			Hint: workflow.Hint{Allowed: conn.public, Pointer: pointer}}
	case workflow.ReasonUnknownParam:
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
		return &workflow.Skip{ReasonCode: workflow.ReasonUnknownParam, Reason: reason, Hint: v.hint}
	default:
		reason := fmt.Sprintf("Param %q of block %q (%s) is invalid at %s: %s (rule: %s).", v.name, blockID, conn.Type(), pointer, v.detail, v.rule)
		if v.name == "" {
			reason = fmt.Sprintf("The params of block %q (%s) are invalid: %s (rule: %s).", blockID, conn.Type(), v.detail, v.rule)
		}
		switch {
		case v.hint.Value != nil:
			raw, _ := json.Marshal(v.hint.Value)
			reason += fmt.Sprintf(" Did you mean %s?", raw)
		case v.hint.DidYouMean != "":
			reason += fmt.Sprintf(" Did you mean %q?", v.hint.DidYouMean)
		}
		if len(v.hint.Allowed) > 0 {
			reason += fmt.Sprintf(" Allowed: %s.", listOf(v.hint.Allowed, maxListed))
		}
		if len(v.hint.AllowedValues) == 2 {
			reason += fmt.Sprintf(" Allowed: from %v to %v.", v.hint.AllowedValues[0], v.hint.AllowedValues[1])
		}
		reason += " GET /api/connectors shows the param's schema."
		v.hint.Pointer = pointer
		return &workflow.Skip{ReasonCode: workflow.ReasonInvalidParam, Reason: reason, Hint: v.hint}
	}
}

func invalidBlockID(id string) *workflow.Skip {
	reason := "add needs a block_id: 1 to 64 letters, digits, \"_\" or \"-\"."
	hint := workflow.Hint{Pointer: "/block_id"}
	if id != "" {
		reason = fmt.Sprintf("block_id %q is invalid: it must be 1 to 64 letters, digits, \"_\" or \"-\" (^[A-Za-z0-9_-]{1,64}$).", id)
		if s := sanitizeID(id); s != "" {
			hint.DidYouMean = s
			reason += fmt.Sprintf(" Did you mean %q?", s)
		}
	}
	return &workflow.Skip{ReasonCode: workflow.ReasonInvalidBlockID, Reason: reason, Hint: hint}
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
