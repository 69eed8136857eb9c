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

// Which connectors run inside the step's transaction is a decision per connector: only the one
// that reaches outside the process (http.request) runs after its attempt is committed.
func TestInline(t *testing.T) {
	t.Parallel()
	var outside []string
	for typ := range executors.Executors(slog.New(slog.DiscardHandler), executors.HTTPConfig{}) {
		if !executors.Inline(typ) {
			outside = append(outside, typ)
		}
	}
	require.Equal(t, []string{"http.request"}, outside)
	require.False(t, executors.Inline("nope"))
}
