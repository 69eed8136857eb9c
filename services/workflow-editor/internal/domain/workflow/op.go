package workflow

// OpType is an operation_type of the patch endpoint.
type OpType string

// The operations of a batch (docs/API.md, "Workflows and the operations batch").
const (
	OpAdd        OpType = "add"
	OpUpdate     OpType = "update"
	OpRemove     OpType = "remove"
	OpConnect    OpType = "connect"
	OpDisconnect OpType = "disconnect"
)

// OpTypes lists the operation types, in the order a reason text names them.
func OpTypes() []string {
	return []string{string(OpAdd), string(OpUpdate), string(OpRemove), string(OpConnect), string(OpDisconnect)}
}

// Op is one edit operation as the client sent it. Fields an operation does not use are ignored;
// missing ones are empty. Params values are JSON values decoded with UseNumber; a nil value is a
// JSON null (for update: remove that param).
type Op struct {
	Type          string
	BlockID       string
	BlockType     string
	Params        map[string]any
	HasParams     bool // params was sent and is an object
	TargetBlockID string
	Branch        *string
	// BranchJSON is the branch as sent when it is not a JSON string (true, 1): the connect is
	// skipped with invalid_branch, naming the string meant.
	BranchJSON *string
}
