package workflow

// ReasonCode says why an operation was skipped (contract §2).
type ReasonCode string

// Every skip reason of the contract, and workflow_too_large, which this service adds to the
// contract's list (ADR 0007, note on limits): an add or a connect past a workflow's limits, or
// params that would make its definition too big to store.
const (
	ReasonInvalidBlockID         ReasonCode = "invalid_block_id"
	ReasonDuplicateBlockID       ReasonCode = "duplicate_block_id"
	ReasonBlockTypeNotRegistered ReasonCode = "block_type_not_registered"
	ReasonHiddenParam            ReasonCode = "hidden_param_in_input"
	ReasonUnknownParam           ReasonCode = "unknown_param"
	ReasonInvalidParam           ReasonCode = "invalid_param"
	ReasonBlockNotFound          ReasonCode = "block_not_found"
	ReasonInvalidEdgeSource      ReasonCode = "invalid_edge_source"
	ReasonInvalidEdgeTarget      ReasonCode = "invalid_edge_target"
	ReasonSelfLoop               ReasonCode = "self_loop"
	ReasonDuplicateEdge          ReasonCode = "duplicate_edge"
	ReasonEdgeCreatesCycle       ReasonCode = "edge_creates_cycle"
	ReasonInvalidBranch          ReasonCode = "invalid_branch"
	ReasonEdgeNotFound           ReasonCode = "edge_not_found"
	ReasonUnknownOperationType   ReasonCode = "unknown_operation_type"
	ReasonWorkflowTooLarge       ReasonCode = "workflow_too_large"
)

// Hint is the machine-readable help of a skipped operation or a validation error.
type Hint struct {
	// DidYouMean is the closest valid value: a type, a param name or a block id.
	DidYouMean string
	// Allowed lists the valid values.
	Allowed []string
	// Pointer is a JSON Pointer into the operation ("/params/method").
	Pointer string
}

// Empty reports whether the hint says nothing.
func (h Hint) Empty() bool { return h.DidYouMean == "" && len(h.Allowed) == 0 && h.Pointer == "" }

// Skip is one operation that was not applied, with what the client needs to repair it.
type Skip struct {
	OperationIndex int
	OperationType  string
	BlockID        string
	ReasonCode     ReasonCode
	Reason         string
	Hint           Hint
}
