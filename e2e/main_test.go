// Package e2e holds black-box tests of the whole system: the services run as their own
// processes (see harness) and the tests speak HTTP to them.
package e2e

import (
	"os"
	"testing"

	"svc.dev/e2e/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}
