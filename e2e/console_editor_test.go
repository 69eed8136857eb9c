package e2e

import (
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestConsoleEditor builds a workflow in the console with the UI alone, from an organization
// with no workflow (console/editor.mjs, in Debian's chromium): a manual trigger with an input
// schema, an http.request whose URL is made with the template helper, a condition with a
// transform on each branch, one of them with a reference to a block that does not exist on
// purpose, fixed with the did_you_mean button the validation error offers; a change the API
// skips shown on its field; blocks connected from the graph's handle, disconnected, removed
// and renamed. It starts a run from the form generated from the input schema (a wrong value
// named on its field first), watches it complete, starts one that waits for a signal, edits
// the workflow meanwhile (and meets a concurrent edit: the 412 lists it and the change is sent
// again), and shows the waiting run finish on the version it started with. It schedules the
// workflow from its page, and opens a workflow of a hundred blocks whose boxes must not
// overlap.
func TestConsoleEditor(t *testing.T) {
	t.Parallel()
	browser, modules := consoleBrowser(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"path":"` + strings.ReplaceAll(r.URL.Path, `"`, "") + `","in_stock":true}`))
	}))
	t.Cleanup(echo.Close)
	// The editor spends a token per change; a person building a workflow is slower than this
	// script, which the default limit would hold up for minutes (the wait is shown, not failed).
	sys := harness.Start(t, harness.Options{
		TrustGateway: true,
		Env:          map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000"},
		ServiceEnv:   map[harness.Service]map[string]string{harness.Orchestrator: {"SVC_HTTP_ALLOW_PRIVATE": "1"}},
	})

	shots := consoleShots(t)
	out := runConsoleScript(t, "editor.mjs", modules, "BASE_URL="+sys.BaseURL, "CHROMIUM="+browser, "SHOTS="+shots,
		"ECHO_URL="+echo.URL, "EMAIL=editor-"+hex.EncodeToString([]byte(t.Name()))[:8]+"@example.com")
	require.Contains(t, out, "a11y: editor: no serious or critical violation", "axe checked the editor")
	for _, m := range regexp.MustCompile(`(?m)^(shown: |batches sent: ).*$`).FindAllString(out, -1) {
		t.Log(m)
	}
	for _, f := range []string{"console-editor.png", "console-editor-hint.png"} {
		st, err := os.Stat(filepath.Join(shots, f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}
