package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// consoleDir holds package.json and package-lock.json pinning playwright-core, and the script
// (console.mjs) that drives the web console with it.
const consoleDir = "console"

// TestConsole drives the web console the gateway serves at / in a real browser (Debian's
// chromium, headless, through playwright-core): sign up, a workflow created through the API
// and opened (its graph), a run started from the page whose attempts appear without a reload
// (the run's event stream), the signal it waits for sent from the page, the run completed; a
// second run cancelled from the page; an API key created and revoked. It takes screenshots of
// the workflow graph and the run page (docs/ holds the last ones kept, see below).
func TestConsole(t *testing.T) {
	t.Parallel()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: install Debian's chromium (.ci/run does) to run the console's browser test")
	}
	modules := installNodePackage(t, consoleDir, "console-playwright", "playwright-core")
	sys := harness.Start(t, harness.Options{TrustGateway: true})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// An ES module resolves its imports from where it lies (NODE_PATH is not read): the script
	// runs from a directory beside the installed packages.
	src, err := os.ReadFile(filepath.Join(consoleDir, "console.mjs"))
	require.NoError(t, err)
	work := t.TempDir()
	script := filepath.Join(work, "console.mjs")
	require.NoError(t, os.WriteFile(script, src, 0o644))
	require.NoError(t, os.Symlink(modules, filepath.Join(work, "node_modules")))
	// The screenshots go to a temporary directory, so a test run leaves the tree as it was;
	// SVC_CONSOLE_SCREENSHOTS=docs (or any directory) keeps them, to refresh docs/ by hand.
	shots := t.TempDir()
	if dir := os.Getenv("SVC_CONSOLE_SCREENSHOTS"); dir != "" {
		shots, err = filepath.Abs(filepath.Join("..", dir))
		require.NoError(t, err)
	}
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(environ(), "BASE_URL="+sys.BaseURL, "CHROMIUM="+browser,
		"SHOTS="+shots, "EMAIL=console-"+hex.EncodeToString([]byte(t.Name()))[:8]+"@example.com")
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	require.NoError(t, err, "console.mjs:\n%s", out.String())
	require.Contains(t, out.String(), "\nok\n", out.String())

	// The key revoked on the page is refused at once.
	m := regexp.MustCompile(`revoked: (svc_\w+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	req, err := http.NewRequest(http.MethodGet, sys.BaseURL+"/api/workflows", nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", m[1])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	for _, f := range []string{"console-graph.png", "console-run.png"} {
		st, err := os.Stat(filepath.Join(shots, f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}
