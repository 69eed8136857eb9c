package executors_test

import (
	"log/slog"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/adapters/executors"
)

// Every catalog type has an executor and every executor a catalog entry: the editor and the
// orchestrator speak the same catalog.
func TestExecutorsMatchCatalog(t *testing.T) {
	t.Parallel()
	var catalog, types []string
	for _, e := range connectors.MustLoad() {
		catalog = append(catalog, e.Type)
	}
	for typ := range executors.Executors(slog.New(slog.DiscardHandler), executors.HTTPConfig{}) {
		types = append(types, typ)
	}
	sort.Strings(catalog)
	sort.Strings(types)
	require.Equal(t, catalog, types)
}
