package check_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/deploy/check"
)

// Every kustomize root under deploy/ builds, and every object it renders decodes strictly
// into its Kubernetes API type.
func TestKustomizeBuildsStrict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dirs, err := check.Kustomizations(b.path("deploy"))
	require.NoError(t, err)
	// Each service has a base, and the dev overlay exists.
	want := []string{b.path("deploy", "k8s", "overlays", "dev")}
	for _, svc := range b.services {
		want = append(want, b.path("deploy", "k8s", "base", svc))
	}
	require.Subset(t, dirs, want)
	for _, dir := range dirs {
		rel, _ := filepath.Rel(b.root, dir)
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			r, err := check.Render(dir)
			require.NoError(t, err)
			require.NotEmpty(t, r.Objects)
		})
	}
}
