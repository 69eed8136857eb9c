package workflow

// ValidationCode names a problem of a workflow's graph (docs/API.md). A workflow with any can
// be saved but not run.
type ValidationCode string

// Every validation code of the API.
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
	Code    ValidationCode
	BlockID string
	Message string
	Pointer string // into the block: "/params/url"
	// DidYouMean is what to set at Pointer: for a param, its whole repaired value (the
	// expression or the template string with every problem of it fixed); for no_trigger, the
	// trigger type most likely meant.
	DidYouMean string
	// NoIncomingEdge lists, for no_trigger, the blocks no edge leads into.
	NoIncomingEdge []string
	// missing lists the blocks the value at Pointer names that do not exist: a repair made
	// without them is wrong when the batch meant to add them.
	missing []string
}

// Missing lists the blocks that the value at Pointer names and that do not exist, when
// DidYouMean repairs that value: the repair is wrong if the batch meant to add them.
func (e ValidationError) Missing() []string { return e.missing }

// SetMissing records the blocks Missing lists.
func (e *ValidationError) SetMissing(ids []string) { e.missing = ids }

// MaxValidationErrors is the most validation errors a workflow lists. A workflow with errors
// cannot run, and a client repairs it a few errors at a time, so the first ones (whole-workflow
// ones first, then block by block) are listed and the last says how many more there are:
// listing each of thousands, every one with its upstream blocks, would make every read and
// every patch answer megabytes.
const MaxValidationErrors = 200

// Checked is a workflow together with the problems of its definition, as readers see it.
type Checked struct {
	*Workflow
	ValidationErrors []ValidationError
}
