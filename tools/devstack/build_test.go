package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

func TestBuildServices(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the Go compiler")
	}
	goBin, err := goBinary(exec.LookPath, envMap(os.Environ()))
	require.NoError(t, err)

	// A workspace shaped like the repository: libs/buildinfo holds the version variable that
	// the -ldflags must reach, and each service has its main package under cmd/<name>.
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		path = filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	write("go.work", "go 1.26.0\n\nuse (\n\t./libs\n\t./services/good\n\t./services/bad\n)\n")
	write("libs/go.mod", "module svc.dev/libs\n\ngo 1.26.0\n")
	write("libs/buildinfo/buildinfo.go", "package buildinfo\n\nvar version = \"unset\"\n\nfunc Version() string { return version }\n")
	for _, name := range []string{"good", "bad"} {
		write("services/"+name+"/go.mod", "module svc.dev/services/"+name+"\n\ngo 1.26.0\n\nrequire svc.dev/libs v0.0.0\n")
	}
	write("services/good/cmd/good/main.go",
		"package main\n\nimport (\n\t\"fmt\"\n\n\t\"svc.dev/libs/buildinfo\"\n)\n\nfunc main() { fmt.Print(buildinfo.Version()) }\n")
	write("services/bad/cmd/bad/main.go", "package main\n\nfunc main() { undefinedThing() }\n")

	binDir := filepath.Join(root, ".devstack", "bin")
	env := append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"), "GOFLAGS=-buildvcs=false", "GOPROXY=off")

	t.Run("StampsTheVersion", func(t *testing.T) {
		t.Parallel()
		out := &testkit.SyncBuffer{}
		require.NoError(t, buildServices(t.Context(), goBin, root, binDir, "v1.2.3-4-gabc-dirty", []string{"good"}, env, 2, out))
		require.Contains(t, out.String(), "built good in")
		got, err := exec.Command(filepath.Join(binDir, "good")).Output()
		require.NoError(t, err)
		require.Equal(t, "v1.2.3-4-gabc-dirty", string(got))
		require.NoError(t, checkBinaries(binDir, []string{"good"}))
	})

	t.Run("FailureNamesTheServiceAndShowsTheCompiler", func(t *testing.T) {
		t.Parallel()
		out := &testkit.SyncBuffer{}
		err := buildServices(t.Context(), goBin, root, filepath.Join(root, "otherbin"), "dev", []string{"bad"}, env, 2, out)
		require.ErrorContains(t, err, "go build failed for bad")
		require.Contains(t, out.String(), "build bad | ")
		require.Contains(t, out.String(), "undefinedThing")
		require.ErrorContains(t, checkBinaries(filepath.Join(root, "otherbin"), []string{"bad"}), "no binary for bad")
	})
}

func TestBuildVersion(t *testing.T) {
	t.Parallel()

	// Not a git repository: the version falls back to "dev".
	require.Equal(t, "dev", buildVersion(t.Context(), t.TempDir()))

	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	gitRun("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	gitRun("add", "f")
	gitRun("commit", "-q", "-m", "one")
	gitRun("tag", "v0.1.0")
	require.Equal(t, "v0.1.0", buildVersion(t.Context(), dir))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("y"), 0o644))
	require.True(t, strings.HasSuffix(buildVersion(t.Context(), dir), "-dirty"))
}
