package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/tools/internal/workspace"
)

// adapterPkg splits an adapter's import path into its service and its adapter (the folder
// under internal/adapters; deeper packages belong to that adapter).
var adapterPkg = regexp.MustCompile(`^svc\.dev/services/([^/]+)/internal/adapters/([^/]+)`) //nolint:gochecknoglobals // a constant pattern

type listedPackage struct {
	ImportPath string
	Imports    []string
}

// TestAdaptersImportNoOtherAdapter holds the shipped code of every service's adapters to their
// own package: adapters are composed in internal/service, never by one another. Test files are
// outside the rule: they may use the in-memory adapter or the shared contract suite
// (adapters/adaptertest) to check the one under test.
func TestAdaptersImportNoOtherAdapter(t *testing.T) {
	t.Parallel()

	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := workspace.Root(wd)
	require.NoError(t, err)

	var patterns []string
	for _, mod := range strings.Fields(goList(t, root, "-m", "-f", "{{.Path}}")) {
		if strings.HasPrefix(mod, "svc.dev/services/") {
			patterns = append(patterns, mod+"/...")
		}
	}
	require.NotEmpty(t, patterns, "no service modules in go.work")

	out := goList(t, root, append([]string{"-e", "-json=ImportPath,Imports"}, patterns...)...)
	dec := json.NewDecoder(strings.NewReader(out))
	checked := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		from := adapterPkg.FindStringSubmatch(p.ImportPath)
		if from == nil {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			to := adapterPkg.FindStringSubmatch(imp)
			if to == nil || to[1] != from[1] || to[2] == from[2] {
				continue
			}
			t.Errorf("%s imports %s: an adapter must not import another adapter; compose them in internal/service, or move what both need into the domain or the app's ports", p.ImportPath, imp)
		}
	}
	require.Positive(t, checked, "no adapter packages found")
}

func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}
