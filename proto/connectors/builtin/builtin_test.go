package builtin_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin"
)

// TestEveryConnectorIsWhole: a connector is one folder holding its catalog entry and its
// Runtime. Every catalog type has exactly one Runtime and every Runtime a catalog entry, its
// JSON file sits in the folder of the package that registers it, its raw and hidden params are
// params of its entry, and only an inline connector may finish a run at its dispatch.
func TestEveryConnectorIsWhole(t *testing.T) {
	t.Parallel()
	cfg := connectors.Config{Log: slog.New(slog.DiscardHandler), AllowPrivateNetwork: true}
	entries := map[string]connectors.Entry{}
	for _, e := range connectors.MustLoad() {
		entries[e.Type] = e
	}
	seen := map[string]bool{}
	for _, rt := range builtin.All() {
		t.Run(rt.Type, func(t *testing.T) {
			require.False(t, seen[rt.Type], "registered twice")
			seen[rt.Type] = true
			entry, ok := entries[rt.Type]
			require.True(t, ok, "no catalog entry: add %s.json to the connector's folder", rt.Type)
			require.NotNil(t, rt.New, "no executor")
			require.NotNil(t, rt.New(cfg), "no executor")

			folder := folderOf(t, rt.Type)
			require.True(t, registers(t, folder, rt.Type), "the Runtime of %s must be registered by the Go code in %s, beside its catalog entry", rt.Type, folder)

			params := paramNames(t, entry)
			for _, p := range rt.Raw {
				require.Contains(t, params, p, "raw param %s is not a param of the entry", p)
			}
			if rt.Hidden != nil {
				for p := range rt.Hidden(cfg) {
					require.Contains(t, entry.HiddenParams(), p, "param %s is set by the server but not hidden in the entry", p)
				}
			}
			if rt.AtDispatch {
				require.True(t, rt.Inline, "only an inline connector may finish a run at its dispatch")
			}
		})
	}
	for typ := range entries {
		require.True(t, seen[typ], "catalog type %s has no Runtime: register it in builtin.All", typ)
	}
}

// Every catalog type has an executor and every executor a catalog entry: the editor and the
// orchestrator speak the same catalog.
func TestExecutorsMatchCatalog(t *testing.T) {
	t.Parallel()
	var catalog, types []string
	for _, e := range connectors.MustLoad() {
		catalog = append(catalog, e.Type)
	}
	for _, rt := range builtin.All() {
		types = append(types, rt.Type)
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
	for _, rt := range builtin.All() {
		if !rt.Inline {
			outside = append(outside, rt.Type)
		}
	}
	require.Equal(t, []string{"http.request"}, outside)
}

// folderOf is the folder holding typ's catalog entry.
func folderOf(t *testing.T, typ string) string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join("*", typ+".json"))
	require.NoError(t, err)
	require.Len(t, found, 1, "%s.json: exactly one folder holds it", typ)
	return filepath.Dir(found[0])
}

// registers reports whether the Go code (tests aside) in folder names the type typ.
func registers(t *testing.T, folder, typ string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(folder, "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(src), `"`+typ+`"`) {
			return true
		}
	}
	return false
}

func paramNames(t *testing.T, e connectors.Entry) []string {
	t.Helper()
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(e.Params, &s))
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
