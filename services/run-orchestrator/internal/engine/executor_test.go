package engine_test

import (
	"log/slog"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/engine"
)

// Every catalog type has an executor and every executor a catalog entry: the editor and the
// orchestrator speak the same catalog.
func TestExecutorsMatchCatalog(t *testing.T) {
	t.Parallel()
	var catalog, executors []string
	for _, e := range connectors.MustLoad() {
		catalog = append(catalog, e.Type)
	}
	for typ := range engine.Executors(slog.New(slog.DiscardHandler), engine.HTTPConfig{}) {
		executors = append(executors, typ)
	}
	sort.Strings(catalog)
	sort.Strings(executors)
	require.Equal(t, catalog, executors)
}
