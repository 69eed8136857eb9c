package chaos

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
