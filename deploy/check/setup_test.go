package check_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/deploy/check"
)

// scaled are the services that get an autoscaler and a disruption budget: the two that take
// the traffic and the load (issue 8).
var scaled = map[string]bool{"gateway": true, "run-orchestrator": true}

type bundle struct {
	root     string
	services []string
}

func setup(t *testing.T) bundle {
	t.Helper()
	root, err := check.Root(".")
	require.NoError(t, err)
	services, err := check.Services(root)
	require.NoError(t, err)
	return bundle{root: root, services: services}
}

func (b bundle) path(elem ...string) string {
	return filepath.Join(append([]string{b.root}, elem...)...)
}
