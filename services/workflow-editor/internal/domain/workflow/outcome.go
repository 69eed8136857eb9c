package workflow

// Outcome is the result of applying a batch of operations.
type Outcome struct {
	Definition Definition
	Applied    int
	Skipped    []Skip
}

// The limits of one workflow. Every read validates the whole graph and every patch rewrites the
// whole definition, so a workflow is kept to a size whose reads and patches stay in
// milliseconds; the limits are a few times what the largest real workflows need. The byte
// limit also keeps a definition far below what one Postgres jsonb value can hold (256 MB), so
// a batch the applier accepts can always be stored.
const (
	MaxBlocks          = 2000
	MaxEdges           = 4000
	MaxDefinitionBytes = 8 << 20
)

// Applier applies a batch of operations to a definition. The connector catalog is one: it
// knows the block types and checks each operation's params against them.
type Applier interface {
	// Apply applies ops to def in order, each on its own: an operation that cannot apply is
	// skipped with a reason and the rest still apply. def is not changed, and the result is
	// a sound graph whatever ops hold.
	Apply(def Definition, ops []Op) Outcome
}
