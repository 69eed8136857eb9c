package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"svc.dev/e2e/harness"
)

// examplesDir holds the example workflows (ops files a user sends as they are).
const examplesDir = "../examples"

// TestExamples runs every file of examples/ end to end through the gateway, as
// examples/README.md tells a user to: created from the file with the svc CLI, started (or
// triggered by a signed webhook), signalled where it waits, and read back complete with the
// output the README promises. Each file is also sent as it is over plain HTTP (the curl way).
func TestExamples(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	suffix := randomLowerHex(t, 6)
	orgName := "Examples " + suffix
	slug := "examples-" + suffix // what svc login --org-name makes of the name
	sys := harness.Start(t, harness.Options{
		TrustGateway: true,
		Env:          map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"},
		ServiceEnv: map[harness.Service]map[string]string{
			// The HTTP example calls a server of this test, on loopback.
			harness.Orchestrator: {"SVC_HTTP_ALLOW_PRIVATE": "1"},
			// The webhook example's route, as examples/README.md configures it.
			harness.Webhook: {"SVC_WEBHOOK_STANDARD_SECRET": whStandardSecret, "SVC_WEBHOOK_STANDARD_ORG": slug, "SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event"},
		},
	})
	root := newCLI(t, bin, sys.BaseURL)
	out := obj(t, decodeAny(t, root.ok("login", "--email", uniqueEmail("examples"), "--password", "correct horse battery", "--non-interactive", "--org-name", orgName).stdout))
	require.Equal(t, slug, out["organizationSlug"])

	// The files themselves: four or more, each a valid {"ops": [...]} document.
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4, "examples/ holds at least four workflows")

	t.Run("Hello", func(t *testing.T) {
		t.Parallel()
		c := root.forT(t)
		id := c.exampleWorkflow("hello", "hello.json")
		res := c.ok("run", id, "--input", `{"name":"world"}`, "--follow")
		final := finalRun(t, res)
		require.Equal(t, map[string]any{"say": map[string]any{"message": "Hello, world!"}}, final["output"])

		// The trigger's input_schema holds: a run without a name is refused.
		bad := c.run("run", id, "--input", `{}`)
		require.Equal(t, 1, bad.code, bad)
		require.Contains(t, bad.stderr, "invalid_body")
	})

	t.Run("HTTPCheckTakesTheBranchOfTheAnswer", func(t *testing.T) {
		t.Parallel()
		c := root.forT(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Path != "/ok" {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"status":"unavailable"}`))
				return
			}
			_, _ = w.Write([]byte(`{"status":"ok","version":"1.2.3"}`))
		}))
		t.Cleanup(srv.Close)
		id := c.exampleWorkflow("http-check", "http-check.json")

		up := finalRun(t, c.ok("run", id, "--input", `{"url":"`+srv.URL+`/ok"}`, "--follow"))
		require.Equal(t, map[string]any{"up": map[string]any{"url": srv.URL + "/ok", "state": "up", "version": "1.2.3"}}, up["output"])

		down := finalRun(t, c.ok("run", id, "--input", `{"url":"`+srv.URL+`/broken"}`, "--follow"))
		require.Equal(t, map[string]any{"down": map[string]any{"url": srv.URL + "/broken", "state": "down", "http_status": float64(503)}}, down["output"])
	})

	t.Run("WaitForSignal", func(t *testing.T) {
		t.Parallel()
		c := root.forT(t)
		id := c.exampleWorkflow("approval", "wait-for-signal.json")
		runID := obj(t, decodeAny(t, c.ok("run", id, "--input", `{"item":"invoice 42"}`).stdout))["runId"].(string)
		waiting := c.waitRun(runID, func(r map[string]any) bool { return r["status"] == "waiting" })
		require.Equal(t, map[string]any{"block_id": "approval", "kind": "signal", "signal": "approve"}, withoutNulls(obj(t, waiting["waiting"])))

		sig := obj(t, decodeAny(t, c.ok("runs", "signal", runID, "--name", "approve", "--payload", `{"by":"ana"}`).stdout))
		require.Equal(t, true, sig["delivered"], sig)
		final := finalRun(t, c.ok("runs", "logs", runID, "--follow"))
		require.Equal(t, "completed", final["status"])
		got := obj(t, decodeAny(t, c.ok("runs", "get", runID).stdout))
		require.Equal(t, map[string]any{"done": map[string]any{"item": "invoice 42", "approved_by": "ana"}}, got["output"])
	})

	t.Run("WebhookTriggered", func(t *testing.T) {
		t.Parallel()
		c := root.forT(t)
		id := c.exampleWorkflow("on-event", "on-event.json")
		body := `{"type":"invoice.paid","data":{"id":7}}`
		r := deliverStandard(t, sys, "billing", "msg_"+randomLowerHex(t, 8), time.Now(), body)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		runID, _ := r.Body["workflowRunId"].(string)
		require.Regexp(t, `^run_`, runID)
		done := c.waitRun(runID, func(r map[string]any) bool { return r["status"] != "queued" && r["status"] != "running" })
		require.Equal(t, "completed", done["status"], done)
		require.Equal(t, id, done["workflowId"])
		require.Equal(t, "webhook", obj(t, done["trigger"])["kind"])
		require.Equal(t, map[string]any{"summary": map[string]any{"source": "billing", "type": "invoice.paid", "data": map[string]any{"id": float64(7)}}}, done["output"])
	})

	// The curl way: POST /api/workflows, then the file's bytes, unchanged, to the operations
	// endpoint. Every example applies whole and validates.
	t.Run("EachFileSentAsItIsOverHTTP", func(t *testing.T) {
		t.Parallel()
		key := requireSession(t, readCredentials(t, root.credsPath), sys.BaseURL)["apiKey"].(string)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			name := "raw-" + strings.TrimSuffix(filepath.Base(f), ".json")
			created := call(t, http.MethodPost, sys.BaseURL+"/api/workflows", strings.NewReader(`{"name":"`+name+`"}`),
				"Authorization", "Bearer "+key, "Content-Type", "application/json")
			require.Equal(t, http.StatusCreated, created.Status, created.Raw)
			id := created.Body["id"].(string)
			r := call(t, http.MethodPost, sys.BaseURL+"/api/workflows/"+id+"/operations", bytes.NewReader(raw),
				"Authorization", "Bearer "+key, "Content-Type", "application/json")
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", f, r.Raw)
			require.Empty(t, r.Body["skipped_items"], "%s: %s", f, r.Raw)
			require.Empty(t, r.Body["validation_errors"], "%s: %s", f, r.Raw)
			require.EqualValues(t, 2, r.Body["version"], "%s: one batch, one version", f)
		}
	})

	t.Run("OpenAPIDocumentIsServedOpen", func(t *testing.T) {
		t.Parallel()
		r := call(t, http.MethodGet, sys.BaseURL+"/api/openapi.json", nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Empty(t, r.Header.Get("RateLimit-Limit"), "open: no bucket")
		var got any
		require.NoError(t, json.Unmarshal([]byte(r.Raw), &got))
		src, err := os.ReadFile("../proto/openapi/svc.yaml")
		require.NoError(t, err)
		var doc any
		require.NoError(t, yaml.Unmarshal(src, &doc))
		b, err := json.Marshal(doc)
		require.NoError(t, err)
		var want any
		require.NoError(t, json.Unmarshal(b, &want))
		require.Equal(t, want, got, "the document served is svc.yaml")
	})
}

// forT is the runner for a subtest: its failures are the subtest's.
func (c *cliRunner) forT(t *testing.T) *cliRunner {
	cp := *c
	cp.t = t
	return &cp
}

// exampleWorkflow creates a workflow from an example file with the CLI, as
// examples/README.md shows, and returns its id.
func (c *cliRunner) exampleWorkflow(name, file string) string {
	c.t.Helper()
	wf := obj(c.t, decodeAny(c.t, c.ok("workflows", "create", "--name", name, "-f", filepath.Join(examplesDir, file)).stdout))
	require.Empty(c.t, wf["skipped_items"], wf)
	require.Empty(c.t, wf["validation_errors"], wf)
	id, _ := wf["id"].(string)
	require.Regexp(c.t, `^wf_`, id)
	return id
}

// finalRun is the last JSON line a --follow printed: the ended run.
func finalRun(t *testing.T, res cliResult) map[string]any {
	t.Helper()
	lines := jsonLines(t, res.stdout)
	require.NotEmpty(t, lines, res)
	final := lines[len(lines)-1]
	require.Equal(t, "completed", final["status"], res)
	return final
}

func withoutNulls(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

func randomLowerHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)[:n]
}
