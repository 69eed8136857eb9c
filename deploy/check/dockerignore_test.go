package check_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDockerignore: the root .dockerignore (the Dockerfile's context is the repository root)
// leaves in everything the build reads: go.work and its sum, every module of the workspace
// with its go.mod and sources, and the probe. A pattern that matches a directory drops all of
// it, so every parent of a needed path is checked too.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw, err := os.ReadFile(b.path(".dockerignore"))
	require.NoError(t, err)
	var excludes, includes []*regexp.Regexp
	for line := range strings.SplitSeq(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if p, ok := strings.CutPrefix(line, "!"); ok {
			includes = append(includes, dockerignorePattern(p))
			continue
		}
		excludes = append(excludes, dockerignorePattern(line))
	}
	require.NotEmpty(t, excludes)

	needed := []string{"go.work", "go.work.sum", "deploy/check/cmd/probe/main.go", "libs/buildinfo/buildinfo.go"}
	for _, mod := range workspaceGoLines(t, b)[1:] {
		dir := filepath.ToSlash(filepath.Dir(filepath.Clean(mod.file)))
		needed = append(needed, dir+"/go.mod", dir+"/go.sum")
	}
	for _, svc := range b.services {
		needed = append(needed, "services/"+svc+"/cmd/"+svc+"/main.go")
	}
	for _, p := range needed {
		if _, err := os.Stat(b.path(p)); err != nil {
			continue // a module without go.sum, say
		}
		for prefix := p; prefix != "."; prefix = filepath.ToSlash(filepath.Dir(prefix)) {
			for _, re := range excludes {
				if re.MatchString(prefix) && !matchesAnyRe(includes, p) {
					require.Fail(t, "excluded", ".dockerignore pattern %s drops %s, which the build needs", re, p)
				}
			}
		}
	}
	// And it keeps out what must not reach the daemon.
	for _, p := range []string{".git", "e2e/betterauth/node_modules"} {
		require.True(t, matchesAnyRe(excludes, p), ".dockerignore should exclude %s", p)
	}
}

// dockerignorePattern compiles a .dockerignore pattern (Go filepath.Match syntax plus **, as
// relative to the context root) into a regular expression over slash-separated paths.
func dockerignorePattern(p string) *regexp.Regexp {
	p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			re.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			re.WriteString(".*")
			i++
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String())
}

func matchesAnyRe(res []*regexp.Regexp, p string) bool {
	for _, re := range res {
		if re.MatchString(p) {
			return true
		}
	}
	return false
}
