package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// readmeAddress is the address the README's commands use: the test points them at its system.
const readmeAddress = "http://localhost:8080"

// TestQuickstart runs the root README's Quickstart: every ```sh block of that section, in
// order, as one bash script (-e, pipefail) from the repository root, against a fresh system
// whose address replaces http://localhost:8080. The blocks build the CLI themselves
// (make svc), log in, create and run the examples, signal, and call the API with curl.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "make", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the quickstart needs %s on PATH", tool)
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := quickstartBlocks(string(readme))
	require.GreaterOrEqual(t, len(blocks), 3, "the README's Quickstart section holds its commands in ```sh blocks")
	script := strings.Join(blocks, "\n")
	require.Contains(t, script, readmeAddress, "the quickstart names the address make run serves")
	for _, f := range []string{"examples/hello.json", "examples/wait-for-signal.json"} {
		require.Contains(t, script, f, "the quickstart uses the examples")
	}

	sys := harness.Start(t, harness.Options{TrustGateway: true, Env: map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"}})
	script = strings.ReplaceAll(script, readmeAddress, sys.BaseURL)

	// The script begins with `make svc`. On a fresh clone that downloads the CLI's modules and
	// builds it while other packages' tests load the machine (CI once needed more than the
	// script's 4 minutes for it), so it is run once beforehand with room of its own: the
	// script's own `make svc` then finds the CLI built.
	build, cancelBuild := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancelBuild()
	mk := exec.CommandContext(build, "make", "svc")
	mk.Dir, mk.Env = root, environ()
	if out, err := mk.CombinedOutput(); err != nil {
		require.NoError(t, err, "make svc:\n%s", out)
	}
	// Not harness.Context: its minute is short for a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = append(environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	require.NoError(t, err, "the quickstart failed\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())

	out := stdout.String()
	// What the README says each step shows.
	for _, want := range []string{
		`"userEmail": "me@example.com"`,                                   // svc login, piped: JSON
		"http.request",                                                    // svc connectors
		`Output: {"say":{"message":"Hello, world!"}}`,                     // the hello run, followed
		"\n" + `{"done":{"item":"invoice 42","approved_by":"me"}}` + "\n", // jq -c .output
		"/api/openapi.json\n",                                             // the document's own path among its paths
		"/api/workflows/{id}/operations\n",
	} {
		require.Contains(t, out, want, "stdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
	lines := nonEmptyLines(out)
	require.Equal(t, "completed", lines[len(lines)-1], "the last command reads the signalled run's status")
}

// quickstartBlocks returns the bodies of the ```sh blocks between "## Quickstart" and the next
// second-level heading.
func quickstartBlocks(readme string) []string {
	var (
		blocks  []string
		in      bool
		inBlock bool
		cur     strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == "## Quickstart"
		case in && !inBlock && strings.TrimSpace(line) == "```sh":
			inBlock = true
			cur.Reset()
		case in && inBlock && strings.TrimSpace(line) == "```":
			inBlock = false
			blocks = append(blocks, cur.String())
		case in && inBlock:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
