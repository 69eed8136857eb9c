package check_test

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/deploy/check"
)

// TestTiltCompileRuns runs the gateway's compile command exactly as the Tiltfile declares it
// (through sh, with its env), only writing elsewhere, and reads the binary: a static linux
// ELF stamped with a version (the shell expansion of git describe, not its text). It builds a
// whole service, so it is left out of -short runs (make test/unit).
func TestTiltCompileRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a service; run without -short")
	}
	t.Parallel()
	b := setup(t)
	tilt, err := check.RunTiltfile(b.root)
	require.NoError(t, err)
	lr, ok := tilt.LocalResources["gateway-compile"]
	require.True(t, ok)
	out := flagValue(strings.Fields(lr.Cmd), "-o")
	require.NotEmpty(t, out)
	bin := filepath.Join(t.TempDir(), "gateway")
	before := describe(b.root)
	cmd := exec.Command("sh", "-c", strings.Replace(lr.Cmd, "-o "+out, "-o "+bin, 1))
	cmd.Dir = b.root
	cmd.Env = os.Environ()
	for k, v := range lr.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)

	f, err := elf.Open(bin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "dynamically linked")
	}
	info, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	require.Equal(t, "linux", settings["GOOS"])
	require.Equal(t, "0", settings["CGO_ENABLED"])

	// -trimpath keeps -ldflags out of the build info, so look for the stamp itself: the
	// work tree's git description (before or after the build: others may be editing), or
	// "dev" without git. Never the unexpanded command.
	raw, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "$(git describe", "the version is the output of git describe, not its text")
	if after := describe(b.root); after != "dev" {
		require.True(t, bytes.Contains(raw, []byte(before)) || bytes.Contains(raw, []byte(after)),
			"the binary carries no version %q or %q", before, after)
	}
}

// describe is what the Tiltfile stamps: git describe --tags --always --dirty, or dev.
func describe(root string) string {
	cmd := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "dev"
}
