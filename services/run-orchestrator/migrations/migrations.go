// Package migrations holds run-orchestrator's goose migrations for its own schema, orchestrator. They are
// embedded in the binary and applied at start-up under an advisory lock.
package migrations

import "embed"

// FS is the set of migration files.
//
//go:embed *.sql
var FS embed.FS //nolint:gochecknoglobals // go:embed needs a package-level variable
