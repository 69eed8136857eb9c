package workflow_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// UnmarshalFromDatabase rebuilds a stored workflow and checks nothing, so only
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
