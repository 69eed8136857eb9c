package check_test

import (
	"debug/buildinfo"
	"debug/elf"
	"go/ast"
	"go/parser"
	"go/token"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/deploy/check"
)

// TestDockerfile: the production image is built from the workspace by a Go new enough for
// every module, static, stamped with the variable devstack stamps, and runs as non-root on
// distroless (or scratch) with the probe binary beside it.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	df, err := check.ParseDockerfile(b.path("deploy", "docker", "Dockerfile"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(df.Stages), 2, "multi-stage")
	build, final := df.Stages[0], df.Stages[len(df.Stages)-1]

	// The Go of the build stage can build every module of the workspace (GOTOOLCHAIN=local
	// means no toolchain download would save it).
	goVersion := strings.Trim(df.GlobalArgs["GO_VERSION"], `"`)
	require.NotEmpty(t, goVersion, "ARG GO_VERSION")
	require.True(t, strings.HasPrefix(build.From, "golang:"), "build stage: %s", build.From)
	for _, mod := range workspaceGoLines(t, b) {
		require.GreaterOrEqual(t, version.Compare("go"+goVersion, "go"+mod.version), 0,
			"GO_VERSION %s is older than %s's go %s", goVersion, mod.file, mod.version)
	}

	var buildEnv, runs string
	for _, in := range build.Find("ENV") {
		buildEnv += " " + in.Args
	}
	for _, in := range build.Find("RUN") {
		runs += "\n" + in.Args
	}
	require.Contains(t, strings.Fields(buildEnv), "CGO_ENABLED=0", "static binaries")
	require.Contains(t, strings.Fields(buildEnv), "GOTOOLCHAIN=local")
	require.True(t, slicesContainsPrefix(build.Find("COPY"), ". ."), "the whole workspace is copied (go.work needs every module)")

	// Stamped with the variable devstack stamps, which libs/buildinfo declares.
	stamp := regexp.MustCompile(`-X ([\w./-]+)\.(\w+)=\$\{VERSION\}`).FindStringSubmatch(runs)
	require.NotNil(t, stamp, "go build -ldflags \"-X <pkg>.<var>=${VERSION}\"")
	require.Equal(t, devstackVersionVar(t, b), stamp[1]+"."+stamp[2], "the same variable as tools/devstack")
	require.Equal(t, "svc.dev/libs/buildinfo", stamp[1])
	requireDeclaresVar(t, b.path("libs", "buildinfo"), stamp[2])

	// What it builds exists, for every service.
	svcPkg := regexp.MustCompile(`"?\./services/\$\{SVC\}/cmd/\$\{SVC\}"?`)
	require.Regexp(t, svcPkg, runs)
	for _, svc := range b.services {
		require.DirExists(t, b.path("services", svc, "cmd", svc))
	}
	require.Contains(t, runs, "./deploy/check/cmd/probe")
	require.FileExists(t, b.path("deploy", "check", "cmd", "probe", "main.go"))

	// The final stage: distroless static (nonroot) or scratch, a non-root user, the binary
	// as an exec-form entrypoint, and the probe.
	require.Regexp(t, `^(gcr\.io/distroless/static[\w.-]*:nonroot|scratch)$`, final.From)
	users := final.Find("USER")
	require.NotEmpty(t, users, "USER in the final stage")
	user := strings.Split(users[len(users)-1].Args, ":")[0]
	require.NotContains(t, []string{"0", "root"}, user)
	uid, err := strconv.Atoi(user)
	require.True(t, err != nil || uid > 0)
	entry := final.Find("ENTRYPOINT")
	require.Len(t, entry, 1)
	require.Equal(t, `["/svc"]`, entry[0].Args)
	var copies string
	for _, in := range final.Find("COPY") {
		copies += in.Args + "\n"
	}
	require.Contains(t, copies, "/svc")
	require.Contains(t, copies, "/probe", "compose healthchecks run /probe")
}

// TestDockerfileTilt: the development image copies the binary the Tiltfile builds and runs
// it as non-root.
func TestDockerfileTilt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	df, err := check.ParseDockerfile(b.path("deploy", "docker", "Dockerfile.tilt"))
	require.NoError(t, err)
	final := df.Stages[len(df.Stages)-1]
	tilt, err := check.RunTiltfile(b.root)
	require.NoError(t, err)
	copies := final.Find("COPY")
	require.NotEmpty(t, copies)
	for _, svc := range b.services {
		img := tilt.Images["svc/"+svc]
		require.Equal(t, "deploy/docker/Dockerfile.tilt", img.Dockerfile)
		// COPY .bin/${SVC} /app/svc with SVC=svc copies the file the image's context only lets in.
		var found bool
		for _, c := range copies {
			f := strings.Fields(c.Args)
			src, dst := strings.ReplaceAll(f[len(f)-2], "${SVC}", img.BuildArgs["SVC"]), f[len(f)-1]
			if slices.Contains(img.Only, src) && dst == img.Entrypoint[0] {
				found = true
			}
		}
		require.True(t, found, "Dockerfile.tilt copies %v to %v for %s", img.Only, img.Entrypoint, svc)
	}
	users := final.Find("USER")
	require.NotEmpty(t, users)
	require.NotContains(t, []string{"0", "root"}, strings.Split(users[len(users)-1].Args, ":")[0])
}

type goLine struct{ file, version string }

// workspaceGoLines returns the go directive of go.work and of every module it uses.
func workspaceGoLines(t *testing.T, b bundle) []goLine {
	t.Helper()
	goDirective := regexp.MustCompile(`(?m)^go (\S+)`)
	work, err := os.ReadFile(b.path("go.work"))
	require.NoError(t, err)
	var out []goLine
	if m := goDirective.FindSubmatch(work); m != nil {
		out = append(out, goLine{"go.work", string(m[1])})
	}
	uses := regexp.MustCompile(`(?m)^\s*(?:use\s+)?(\./[^\s)]+)\s*$`).FindAllSubmatch(work, -1)
	require.NotEmpty(t, uses)
	for _, u := range uses {
		file := filepath.Join(string(u[1]), "go.mod")
		mod, err := os.ReadFile(b.path(file))
		require.NoError(t, err)
		m := goDirective.FindSubmatch(mod)
		require.NotNil(t, m, "%s has no go line", file)
		out = append(out, goLine{file, string(m[1])})
	}
	return out
}

// devstackVersionVar reads the versionVar constant of tools/devstack.
func devstackVersionVar(t *testing.T, b bundle) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), b.path("tools", "devstack", "build.go"), nil, 0)
	require.NoError(t, err)
	var v string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "versionVar" && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				v, _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	require.NotEmpty(t, v, "tools/devstack/build.go: const versionVar")
	return v
}

// requireDeclaresVar: a package-level string variable called name exists in dir's package,
// so that -X has something to set.
func requireDeclaresVar(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, s := range g.Specs {
					for _, id := range s.(*ast.ValueSpec).Names {
						if id.Name == name {
							return
						}
					}
				}
			}
		}
	}
	require.Fail(t, "no variable", "%s declares no package variable %s for -X", dir, name)
}

func slicesContainsPrefix(ins []check.Instruction, args string) bool {
	for _, in := range ins {
		if strings.HasPrefix(in.Args, args) {
			return true
		}
	}
	return false
}

// TestProbeBinaryStatic builds the probe the way the Dockerfile does (CGO_ENABLED=0, linux) and
// reads the result: an ELF with no interpreter and no dynamic section runs on distroless
// static, which has no libc.
func TestProbeBinaryStatic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := filepath.Join(t.TempDir(), "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./deploy/check/cmd/probe")
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)

	f, err := elf.Open(out)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "the probe asks for a dynamic loader")
		require.NotEqual(t, elf.PT_DYNAMIC, p.Type, "the probe is dynamically linked")
	}
	info, err := buildinfo.ReadFile(out)
	require.NoError(t, err)
	var cgo string
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			cgo = s.Value
		}
	}
	require.Equal(t, "0", cgo)
}
