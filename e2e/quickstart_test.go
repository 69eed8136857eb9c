package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
	"svc.dev/libs/testkit"
)

// readmeAddress is the address the README's commands use: the test points them at its system.
const readmeAddress = "http://localhost:8080"

// examplesMarker is echoed between the README's Quickstart and the examples' page, so the test
// can tell their outputs apart.
const examplesMarker = "--- examples/README.md ---"

// makeRunStandIn is a shell function the script starts with. `make run` starts the system,
// which the test has done already; the examples' page restarts it with settings
// (`SVC_...=... make run`). The function hands those settings (every SVC_* variable of its
// environment, NUL-separated) to the test, which restarts its system's services with them, as
// devstack hands its environment to every service, and answers once they are up. Any other
// make is make.
const makeRunStandIn = `make() {
	if [ "${1-}" != run ]; then command make "$@"; return; fi
	env -0 | grep -z '^SVC_' | curl -sS --fail-with-body --data-binary @- "$E2E_MAKE_RUN_HOOK"
}
`

// TestQuickstart runs the root README's Quickstart, then examples/README.md, then the README's
// MCP example: every ```sh block of the Quickstart section, every ```sh block of the examples'
// page and those of the MCP section, in order, as one bash script (-e, pipefail) from the
// repository root, against a fresh system whose address replaces http://localhost:8080. The
// blocks build the CLI themselves (make svc), log in, create and run the examples, signal,
// deliver a signed webhook, and call the API and the MCP endpoint with curl. The page's
// `make run` restarts the system with the settings it gives (makeRunStandIn).
func TestQuickstart(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "make", "curl", "jq", "openssl", "base64", "od"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the quickstart needs %s on PATH", tool)
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := shBlocks(string(readme), "## Quickstart")
	require.GreaterOrEqual(t, len(blocks), 3, "the README's Quickstart section holds its commands in ```sh blocks")
	quickstart := strings.Join(blocks, "\n")
	require.Contains(t, quickstart, readmeAddress, "the quickstart names the address make run serves")
	for _, f := range []string{"examples/hello.json", "examples/wait-for-signal.json"} {
		require.Contains(t, quickstart, f, "the quickstart uses the examples")
	}
	page, err := os.ReadFile(filepath.Join(root, "examples", "README.md"))
	require.NoError(t, err)
	blocks = shBlocks(string(page), "")
	require.GreaterOrEqual(t, len(blocks), 5, "examples/README.md holds its commands in ```sh blocks")
	examples := strings.Join(blocks, "\n")
	for _, f := range []string{"hello.json", "http-check.json", "wait-for-signal.json", "on-event.json"} {
		require.Contains(t, examples, "examples/"+f, "the page uses every example")
	}
	require.Contains(t, examples, "make run", "the page restarts the system with the settings it needs")
	mcp := strings.Join(shBlocks(string(readme), "## MCP: the API for AI agents"), "\n")
	require.Contains(t, mcp, "/api/mcp", "the README's MCP section calls the MCP endpoint")
	script := makeRunStandIn + quickstart + "echo '" + examplesMarker + "'\n" + examples + mcp

	sys := harness.Start(t, harness.Options{TrustGateway: true, Env: map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"}})
	script = strings.ReplaceAll(script, readmeAddress, sys.BaseURL)
	restarts := make(chan restartRequest)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := restartRequest{env: map[string]string{}, done: make(chan struct{})}
		for _, kv := range strings.Split(string(body), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				req.env[k] = v
			}
		}
		select {
		case restarts <- req:
		case <-r.Context().Done():
			return
		}
		<-req.done
		_, _ = io.WriteString(w, "make run: the system restarted\n")
	}))
	t.Cleanup(hook.Close)

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
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = root
	// On the timeout bash is killed, and its whole process group with it (a curl left waiting
	// on the hook would hold the hook's Close in cleanup); Wait gives up on pipes a straggler
	// keeps open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(environ(), "HOME="+t.TempDir(), "E2E_MAKE_RUN_HOOK="+hook.URL)
	var stdout, stderr testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var restarted []map[string]string
	for waiting := true; waiting; {
		select {
		case req := <-restarts:
			restartSystem(t, sys, req.env)
			restarted = append(restarted, req.env)
			close(req.done)
		case err = <-exited:
			waiting = false
		}
	}
	require.NoError(t, err, "the quickstart failed\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())

	before, after, found := strings.Cut(stdout.String(), examplesMarker+"\n")
	require.True(t, found, stdout.String())
	// What the README says each step shows.
	for _, want := range []string{
		`"userEmail": "me@example.com"`,                                   // svc login, piped: JSON
		"http.request",                                                    // svc connectors
		`Output: {"say":{"message":"Hello, world!"}}`,                     // the hello run, followed
		"\n" + `{"done":{"item":"invoice 42","approved_by":"me"}}` + "\n", // jq -c .output
		"/api/openapi.json\n",                                             // the document's own path among its paths
		"/api/workflows/{id}/operations\n",
	} {
		require.Contains(t, before, want, "stdout:\n%s\nstderr:\n%s", before, stderr.String())
	}
	lines := nonEmptyLines(before)
	require.Equal(t, "completed", lines[len(lines)-1], "the Quickstart's last command reads the signalled run's status")

	// The page's one `make run` turned on what its examples need.
	require.Len(t, restarted, 1, "the page restarts the system once")
	_, slug, _ := strings.Cut(requireLine(t, before, `"organizationSlug": "`), `"organizationSlug": "`)
	require.Equal(t, map[string]string{
		"SVC_HTTP_ALLOW_PRIVATE":        "1",
		"SVC_WEBHOOK_STANDARD_SECRET":   "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"SVC_WEBHOOK_STANDARD_ORG":      strings.TrimSuffix(slug, `",`),
		"SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
	}, restarted[0])
	// And what the page says each example shows: the runs' outputs (followed, as JSON lines or
	// tables, or read with curl), and the skipped items of the operations sent with curl.
	outputs := runOutputs(after)
	for _, want := range []any{
		map[string]any{"say": map[string]any{"message": "Hello, world!"}},                                     // hello, with the CLI and with curl
		map[string]any{"up": map[string]any{"url": sys.BaseURL + "/health", "state": "up", "version": "dev"}}, // http-check's up branch
		map[string]any{"done": map[string]any{"item": "invoice 42", "approved_by": "ana"}},                    // wait-for-signal, signalled
		map[string]any{"done": map[string]any{"item": "invoice 43", "approved_by": "ana"}},                    // signalled with curl
		map[string]any{"summary": map[string]any{"source": "billing", "type": "invoice.paid", // the webhook's run
			"data": map[string]any{"id": float64(7)}}},
	} {
		require.Contains(t, outputs, want, "stdout:\n%s\nstderr:\n%s", after, stderr.String())
	}
	require.Equal(t, 2, strings.Count(after, "\n[]\n"), "no operation sent with curl was skipped: %s", after)
	require.Contains(t, after, `{"status":"completed","output":{"say":{"message":"Hello, world!"}}}`, "the run read with curl")
	// Last, the README's MCP example, with the key it exports first.
	require.Contains(t, after, "\nworkflows_create\n", "the MCP tools, listed over HTTP")
}

// runOutputs are the outputs of the completed runs that s shows: the last JSON line of a
// followed run, a run read with curl ({status, output}), or a table's "Output: {...}".
func runOutputs(s string) []any {
	var out []any
	for _, l := range strings.Split(s, "\n") {
		if _, after, ok := strings.Cut(l, " completed. Output: "); ok {
			var v any
			if json.Unmarshal([]byte(after), &v) == nil {
				out = append(out, v)
			}
			continue
		}
		var run struct {
			Status string `json:"status"`
			Output any    `json:"output"`
		}
		if json.Unmarshal([]byte(l), &run) == nil && run.Status == "completed" && run.Output != nil {
			out = append(out, run.Output)
		}
	}
	return out
}

// restartRequest is the page's `make run` with its settings; done is closed once the system
// is up again with them.
type restartRequest struct {
	env  map[string]string
	done chan struct{}
}

// restartSystem does what a restart of `make run` with env does: it stops every service,
// gateway first, and starts them again, backends first, each with env added to its settings.
func restartSystem(t *testing.T, sys *harness.System, env map[string]string) {
	t.Helper()
	order := []harness.Service{harness.Identity, harness.Editor, harness.Orchestrator, harness.Scheduler, harness.Webhook, harness.Gateway}
	for i := len(order) - 1; i >= 0; i-- {
		for _, p := range sys.Live(order[i]) {
			p.Stop(t)
		}
	}
	for _, svc := range order {
		for k, v := range env {
			sys.SetServiceEnv(svc, k, v)
		}
		sys.Run(t, svc, nil)
	}
}

// requireLine returns the first line of s that contains sub.
func requireLine(t *testing.T, s, sub string) string {
	t.Helper()
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("no line with %q in:\n%s", sub, s)
	return ""
}

// shBlocks returns the bodies of the ```sh blocks of doc, in order: those between heading
// (a line such as "## Quickstart") and the next heading of its level, or all of them when
// heading is "".
func shBlocks(doc, heading string) []string {
	var (
		blocks  []string
		in      = heading == ""
		inBlock bool
		cur     strings.Builder
	)
	level, _, _ := strings.Cut(heading, " ")
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case heading != "" && !inBlock && strings.HasPrefix(line, level+" "):
			in = strings.TrimSpace(line) == heading
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
