package catalog_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

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
