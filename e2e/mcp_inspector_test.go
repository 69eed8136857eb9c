package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// inspectorDir holds package.json and package-lock.json pinning the MCP Inspector (and all it
// depends on); the test installs them with `npm ci` into a cache directory of its own.
const inspectorDir = "mcpinspector"

// TestMCPInspector drives /api/mcp with a third-party MCP client: the MCP Inspector's CLI
// mode (npm @modelcontextprotocol/inspector), over streamable HTTP with the API key in an
// Authorization header. It lists the tools, builds a workflow, runs it and reads the run,
// each a separate `--method tools/call`; without the header the Inspector is refused.
func TestMCPInspector(t *testing.T) {
	t.Parallel()
	inspector := installInspector(t)
	sys := harness.Start(t, harness.Options{Env: map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin}})
	key := apiKeyOf(t, newRunsUser(t, sys, "mcp-inspector"))
	endpoint := sys.BaseURL + "/api/mcp"

	run := func(auth bool, args ...string) (map[string]any, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		argv := []string{"--cli", endpoint, "--transport", "http"}
		if auth {
			argv = append(argv, "--header", "Authorization: Bearer "+key)
		}
		cmd := exec.CommandContext(ctx, inspector, append(argv, args...)...)
		cmd.Env = environ()
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out := stdout.String() + stderr.String()
		if err != nil {
			return nil, out, err
		}
		var v map[string]any
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &v), "inspector output is not JSON: %s", out)
		return v, out, nil
	}
	ok := func(args ...string) map[string]any {
		t.Helper()
		v, out, err := run(true, args...)
		require.NoError(t, err, "mcp-inspector %s:\n%s", strings.Join(args, " "), out)
		return v
	}
	// tool calls a tool and returns its structured output; the Inspector prints the result.
	tool := func(name string, args ...string) map[string]any {
		t.Helper()
		argv := []string{"--method", "tools/call", "--tool-name", name}
		for _, a := range args {
			argv = append(argv, "--tool-arg", a)
		}
		res := ok(argv...)
		require.NotEqual(t, true, res["isError"], "%s: %v", name, res)
		return obj(t, res["structuredContent"])
	}

	listed := ok("--method", "tools/list")
	var names []string
	for _, tl := range objs(t, listed["tools"]) {
		names = append(names, tl["name"].(string))
	}
	require.Subset(t, names, []string{"workflows_create", "workflows_patch", "runs_start", "runs_wait", "runs_logs", "runs_signal"})

	wf := tool("workflows_create", "name=inspector-hello")
	wfID := wf["id"].(string)
	patched := tool("workflows_patch", "workflow_id="+wfID, `ops=[
		{"operation_type":"add","block_id":"start","type":"trigger.manual"},
		{"operation_type":"add","block_id":"hello","type":"log","params":{"message":"hello {{ input.who }}"}},
		{"operation_type":"connect","block_id":"start","target_block_id":"hello"}]`)
	require.Empty(t, patched["skipped_items"], patched)
	require.Empty(t, patched["validation_errors"], patched)
	runID := tool("runs_start", "workflow_id="+wfID, `input={"who":"inspector"}`)["runId"].(string)
	waited := tool("runs_wait", "run_id="+runID, "timeout_seconds=20")
	require.Equal(t, "completed", obj(t, waited["run"])["status"], waited)
	logs := objs(t, tool("runs_logs", "run_id="+runID)["attempts"])
	require.Len(t, logs, 2, logs)
	require.Equal(t, "hello inspector", obj(t, logs[1]["input"])["message"], logs)

	// A tool error reaches it as a result with isError and the contract's code.
	res := ok("--method", "tools/call", "--tool-name", "runs_get", "--tool-arg", "run_id=run_nope")
	require.Equal(t, true, res["isError"], res)
	require.Contains(t, mcpResultText(t, res), `"error":"not_found"`)

	// Without the header the gateway refuses it before MCP sees anything.
	_, out, err := run(false, "--method", "tools/list")
	require.Error(t, err, out)
	require.Contains(t, out, `"error":"unauthorized"`, out)
}

func mcpResultText(t *testing.T, res map[string]any) string {
	t.Helper()
	var parts []string
	for _, c := range objs(t, res["content"]) {
		s, _ := c["text"].(string)
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n")
}

// installInspector installs the pinned MCP Inspector (e2e/mcpinspector) once, as every npm
// tool of these tests is (installNodePackage), and returns its executable.
func installInspector(t *testing.T) string {
	t.Helper()
	return filepath.Join(installNodePackage(t, inspectorDir, "mcp-inspector", "@modelcontextprotocol/inspector"), ".bin", "mcp-inspector")
}
