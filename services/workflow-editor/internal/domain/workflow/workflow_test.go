package workflow_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// STYLE §5: UnmarshalFromDatabase rebuilds a stored workflow and checks nothing, so only
// adapters call it (and the repository contract, which plays a stored row); a use case makes
// workflows with the constructors.
func TestOnlyAdaptersRebuildFromTheDatabase(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..") // internal/
	var callers []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "adapters"+string(filepath.Separator)) || strings.HasPrefix(rel, filepath.Join("domain", "workflow", "workflowtest")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(src), "func UnmarshalFromDatabase(", "")
		if strings.Contains(text, "UnmarshalFromDatabase(") {
			callers = append(callers, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, callers, "UnmarshalFromDatabase is for adapters only")
}

// A workflow created with a definition starts at version 1 whatever its operations do.
func TestNewWithDefinition(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	w, out, err := workflow.NewWithDefinition("wf_1", "org_1", "w", "d", c, ops(t, base), now)
	require.NoError(t, err)
	require.Equal(t, int64(1), w.Version())
	require.Equal(t, 7, out.Applied)
	require.Equal(t, out.Definition, w.Definition())
	require.True(t, w.UpdatedAt().Equal(w.CreatedAt()))

	_, _, err = workflow.NewWithDefinition("wf_1", "org_1", "", "d", c, nil, now)
	var invalid *workflow.InvalidError
	require.ErrorAs(t, err, &invalid)
}
