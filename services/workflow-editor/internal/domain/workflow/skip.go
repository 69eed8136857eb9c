package workflow

// ReasonCode says why an operation was skipped (docs/API.md, "Workflows and the operations
// batch").
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
	// Value, when not nil, is the valid value meant where it is not a string: the number 2000
	// for "2000", an object for headers sent as "Name: value". It is sent as did_you_mean in
	// place of DidYouMean.
	Value any `json:",omitempty"`
	// Allowed lists the valid values.
	Allowed []string
	// AllowedValues, when not nil, lists valid values that are not strings (the bounds of a
	// number's range); it is sent as allowed in place of Allowed.
	AllowedValues []any `json:",omitempty"`
	// Pointer is a JSON Pointer into the operation ("/params/method").
	Pointer string
}

// Empty reports whether the hint says nothing.
func (h Hint) Empty() bool {
	return h.DidYouMean == "" && h.Value == nil && len(h.Allowed) == 0 && len(h.AllowedValues) == 0 && h.Pointer == ""
}

// Suggests reports whether the hint has a did_you_mean.
func (h Hint) Suggests() bool { return h.DidYouMean != "" || h.Value != nil }

// Problem is one reason an operation cannot apply. A skip names its first; Problems lists
// every one, so that one reply says all that must change.
type Problem struct {
	ReasonCode ReasonCode
	Reason     string
	Hint       Hint
}

// Skip is one operation that was not applied, with what the client needs to repair it.
type Skip struct {
	OperationIndex int
	OperationType  string
	BlockID        string
	ReasonCode     ReasonCode
	Reason         string
	Hint           Hint
	// Problems lists every problem of the operation, the skip's own first, when it has more
	// than one; otherwise it is empty.
	Problems []Problem `json:",omitempty"`
}

// AllProblems is every problem of the skip, its own first.
func (s *Skip) AllProblems() []Problem {
	if len(s.Problems) > 0 {
		return s.Problems
	}
	return []Problem{{ReasonCode: s.ReasonCode, Reason: s.Reason, Hint: s.Hint}}
}
