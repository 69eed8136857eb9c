package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/tools/internal/workspace"
)

func TestRoot(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(top, "go.work"), []byte("go 1.26\n"), 0o600))
	deep := filepath.Join(top, "a", "b")
	require.NoError(t, os.MkdirAll(deep, 0o755))

	got, err := workspace.Root(deep)
	require.NoError(t, err)
	require.Equal(t, top, got)

	_, err = workspace.Root(t.TempDir())
	require.ErrorIs(t, err, workspace.ErrNotFound)
}
