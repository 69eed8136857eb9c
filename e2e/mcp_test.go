package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"svc.dev/clients/apiclient"
	"svc.dev/clients/mcptools"
	"svc.dev/e2e/harness"
)

// TestMCP drives the MCP tools as an agent would, through both transports: `svc mcp` as a
// subprocess over stdio (the SDK's CommandTransport) and /api/mcp through the gateway over
// streamable HTTP (the SDK's StreamableClientTransport), each with an API key. Each builds a
// workflow from a batch with a mistake, repairs it from the reply alone, runs it, signals it
// and reads its logs. A key of another organization sees none of it; the endpoint is guarded
// and rate limited like any domain route. The MCP Inspector, a third-party client from npm,
// drives the HTTP endpoint too (TestMCPInspector).
func TestMCP(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	// Each tool call costs the caller one token for the MCP request and one per API call the
	// tool makes: more than the default 60 a minute for this test's pace (the default is
	// TestMCPWaitAtTheDefaultRateLimit's). TrustGateway: `svc login` sends the API's address as
	// Origin.
	sys := harness.Start(t, harness.Options{TrustGateway: true,
		Env: map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin, "SVC_RATE_LIMIT_PER_MINUTE": "2000"}})

	orgA := newRunsUser(t, sys, "mcp-a")
	keyA := apiKeyOf(t, orgA)
	orgB := newRunsUser(t, sys, "mcp-b")
	keyB := apiKeyOf(t, orgB)

	stdio := func(t *testing.T, key string) *mcp.ClientSession {
		t.Helper()
		cmd := exec.Command(bin, "mcp")
		cmd.Env = append(environ(), "HOME="+t.TempDir(), "SVC_API="+sys.BaseURL, "SVC_API_KEY="+key)
		return mcpConnect(t, &mcp.CommandTransport{Command: cmd})
	}
	overHTTP := func(t *testing.T, authorization string) *mcp.ClientSession {
		t.Helper()
		return mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: sys.BaseURL + "/api/mcp", HTTPClient: &http.Client{
			Timeout: 3 * time.Minute, Transport: headerTransport{name: "Authorization", value: authorization}}})
	}

	t.Run("Stdio", func(t *testing.T) {
		t.Parallel()
		mcpBuildRunSignal(t, stdio(t, keyA), "stdio")
	})

	t.Run("HTTP", func(t *testing.T) {
		t.Parallel()
		mcpBuildRunSignal(t, overHTTP(t, "Bearer "+keyA), "http")
	})

	t.Run("StdioWithTheSavedLogin", func(t *testing.T) {
		t.Parallel()
		// No SVC_API_KEY and no SVC_API: `svc mcp` acts with the key `svc login` saved, at the
		// API of the last login.
		home := t.TempDir()
		login := exec.Command(bin, "login", "--email", uniqueEmail("mcp-login"), "--password", "correct horse battery", "--non-interactive")
		login.Env = append(environ(), "HOME="+home, "SVC_API="+sys.BaseURL)
		out, err := login.CombinedOutput()
		require.NoError(t, err, "svc login: %s", out)
		cmd := exec.Command(bin, "mcp")
		cmd.Env = append(environ(), "HOME="+home)
		s := mcpConnect(t, &mcp.CommandTransport{Command: cmd})
		mcpBuildRunSignal(t, s, "login")

		// Without a login nor a key there is nothing to act as: the server does not start.
		cmd = exec.Command(bin, "mcp")
		cmd.Env = append(environ(), "HOME="+t.TempDir(), "SVC_API="+sys.BaseURL)
		cmd.Stdin = strings.NewReader("")
		out, err = cmd.CombinedOutput()
		require.Error(t, err, "svc mcp without credentials: %s", out)
		require.Contains(t, string(out), "login", "it says how to get credentials")
	})

	t.Run("HTTPWithABrowserSession", func(t *testing.T) {
		t.Parallel()
		// Signed in as the console is: the session cookie and the page's Origin, which a
		// browser sends with every POST.
		a := signUp(t, sys, "mcp-cookie")
		in := newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": a.password})
		require.Equal(t, http.StatusOK, in.Status, in.Raw)
		cookie := sessionCookie(t, in.Header)
		s := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: sys.BaseURL + "/api/mcp", HTTPClient: &http.Client{
			Timeout: 3 * time.Minute, Transport: headerTransport{name: "Cookie", value: cookie, origin: testOrigin}}})

		wf := mcpCall(t, s, "workflows_create", map[string]any{"name": "mcp-cookie", "definition": map[string]any{
			"blocks": []any{
				map[string]any{"block_id": "start", "type": "trigger.manual"},
				map[string]any{"block_id": "say", "type": "log", "params": map[string]any{"message": "hello {{ input.who }}"}},
			},
			"edges": []any{map[string]any{"block_id": "start", "target_block_id": "say"}},
		}})
		require.Empty(t, wf["skipped_items"], wf)
		require.Empty(t, wf["validation_errors"], wf)
		wfID := wf["id"].(string)
		runID := mcpCall(t, s, "runs_start", map[string]any{"workflow_id": wfID, "input": map[string]any{"who": "cookie"}})["runId"].(string)
		w := mcpCall(t, s, "runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 20})
		require.Equal(t, "completed", obj(t, w["run"])["status"], w)
		attempts := objs(t, mcpCall(t, s, "runs_logs", map[string]any{"run_id": runID})["attempts"])
		require.Len(t, attempts, 2, attempts)
		i := slices.IndexFunc(attempts, func(a map[string]any) bool { return a["block_id"] == "say" })
		require.GreaterOrEqual(t, i, 0, attempts)
		require.Equal(t, "hello cookie", obj(t, attempts[i]["input"])["message"], attempts)
		// The tools acted as the session's user, in its organization: the API shows the same.
		require.Equal(t, runID, a.c.get("/api/runs/" + runID).Body["runId"])
		require.Contains(t, mcpIDs(t, mcpCall(t, s, "workflows_list", nil)["workflows"], "id"), wfID)

		// Neither a cookie nor a key: the contract's 401, before MCP sees the request; a
		// cookie that is not a session's, the same.
		list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		hdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
		r := call(t, http.MethodPost, sys.BaseURL+"/api/mcp", strings.NewReader(list), hdr...)
		requireError(t, r, http.StatusUnauthorized, "unauthorized")
		require.NotEmpty(t, r.Body["message"], r.Raw)
		r = call(t, http.MethodPost, sys.BaseURL+"/api/mcp", strings.NewReader(list), append(slices.Clone(hdr), "Cookie", cookie[:len(cookie)-4]+"AAAA", "Origin", testOrigin)...)
		requireError(t, r, http.StatusUnauthorized, "unauthorized")
		// The real cookie from a page of another site: 403 invalid_origin, nothing runs.
		r = call(t, http.MethodPost, sys.BaseURL+"/api/mcp", strings.NewReader(list), append(slices.Clone(hdr), "Cookie", cookie, "Origin", "https://evil.example")...)
		requireError(t, r, http.StatusForbidden, "invalid_origin")
		_, err := mcp.NewClient(&mcp.Implementation{Name: "svc-e2e", Version: "1"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: sys.BaseURL + "/api/mcp", HTTPClient: &http.Client{Timeout: 30 * time.Second}}, nil)
		require.Error(t, err, "a client without credentials cannot even initialize")
	})

	t.Run("HTTPWithASession", func(t *testing.T) {
		t.Parallel()
		// A session token works as a key does: the tools act as that user in its organization.
		s := overHTTP(t, "Bearer "+orgA.c.token)
		name := "mcp-session-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		created := mcpCall(t, s, "workflows_create", map[string]any{"name": name})
		listed := mcpCall(t, s, "workflows_list", nil)
		require.Contains(t, mcpIDs(t, listed["workflows"], "id"), created["id"])
	})

	t.Run("OrganizationsSeeOnlyTheirOwn", func(t *testing.T) {
		t.Parallel()
		a := overHTTP(t, "Bearer "+keyA)
		wf := mcpCall(t, a, "workflows_create", map[string]any{"name": "mcp-tenancy-a", "definition": map[string]any{
			"blocks": []any{
				map[string]any{"block_id": "start", "type": "trigger.manual"},
				map[string]any{"block_id": "hold", "type": "wait", "params": map[string]any{"signal": "go"}},
			},
			"edges": []any{map[string]any{"block_id": "start", "target_block_id": "hold"}},
		}})
		require.Empty(t, wf["skipped_items"], wf)
		wfID := wf["id"].(string)
		runID := mcpCall(t, a, "runs_start", map[string]any{"workflow_id": wfID})["runId"].(string)

		for name, b := range map[string]*mcp.ClientSession{"stdio": stdio(t, keyB), "http": overHTTP(t, "Bearer "+keyB)} {
			t.Run(name, func(t *testing.T) {
				require.NotContains(t, mcpIDs(t, mcpCall(t, b, "workflows_list", nil)["workflows"], "id"), wfID)
				require.NotContains(t, mcpIDs(t, mcpCall(t, b, "runs_list", nil)["runs"], "runId"), runID)
				for _, c := range []struct {
					tool string
					args map[string]any
				}{
					{"workflows_get", map[string]any{"workflow_id": wfID}},
					{"workflows_validate", map[string]any{"workflow_id": wfID}},
					{"workflows_patch", map[string]any{"workflow_id": wfID, "ops": []any{map[string]any{"operation_type": "remove", "block_id": "hold"}}}},
					{"workflows_delete", map[string]any{"workflow_id": wfID}},
					{"runs_start", map[string]any{"workflow_id": wfID}},
					{"runs_get", map[string]any{"run_id": runID}},
					{"runs_logs", map[string]any{"run_id": runID}},
					{"runs_signal", map[string]any{"run_id": runID, "name": "go"}},
					{"runs_cancel", map[string]any{"run_id": runID}},
					{"runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 1}},
					{"schedules_create", map[string]any{"workflow_id": wfID, "cron": "@hourly"}},
				} {
					e := mcpCallError(t, b, c.tool, c.args)
					require.Contains(t, []any{"not_found", "workflow_not_found", "run_not_found"}, e["error"], "%s: %v", c.tool, e)
					require.EqualValues(t, http.StatusNotFound, e["status"], "%s: %v", c.tool, e)
				}
				_, err := b.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "svc://workflows/" + wfID})
				require.Error(t, err, "B reads A's workflow as a resource")
			})
		}
		// A's own run is untouched by B's attempts: still waiting, and A can still finish it.
		w := mcpCall(t, a, "runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 10})
		require.Equal(t, true, w["waiting"], w)
		require.Equal(t, true, mcpCall(t, a, "runs_signal", map[string]any{"run_id": runID, "name": "go"})["delivered"])
		w = mcpCall(t, a, "runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 20})
		require.Equal(t, "completed", obj(t, w["run"])["status"], w)
	})

	t.Run("SchedulesAndConnectors", func(t *testing.T) {
		t.Parallel()
		s := overHTTP(t, "Bearer "+keyA)
		cs := mcpCall(t, s, "connectors_list", nil)
		require.Contains(t, mcpIDs(t, cs["connectors"], "type"), "http.request")
		d := mcpCall(t, s, "connector_describe", map[string]any{"type": "http.request"})
		require.NotEmpty(t, d["params"])
		require.NotEmpty(t, d["output_schema"])
		e := mcpCallError(t, s, "connector_describe", map[string]any{"type": "http.reqest"})
		require.Equal(t, "connector_not_found", e["error"])
		require.Equal(t, "http.request", e["did_you_mean"])

		wf := mcpCall(t, s, "workflows_create", map[string]any{"name": "mcp-scheduled"})
		e = mcpCallError(t, s, "schedules_create", map[string]any{"workflow_id": wf["id"], "cron": "every hour"})
		require.Equal(t, "invalid_cron", e["error"], e)
		sch := mcpCall(t, s, "schedules_create", map[string]any{"workflow_id": wf["id"], "cron": "0 3 * * *", "timezone": "Europe/Paris", "input": map[string]any{"n": 1}})
		require.Equal(t, "Europe/Paris", sch["timezone"])
		up := mcpCall(t, s, "schedules_update", map[string]any{"schedule_id": sch["id"], "enabled": false})
		require.Equal(t, false, up["enabled"])
		require.Equal(t, "0 3 * * *", up["cron"])
		require.Contains(t, mcpIDs(t, mcpCall(t, s, "schedules_list", map[string]any{"workflow_id": wf["id"]})["schedules"], "id"), sch["id"])
		require.Equal(t, true, mcpCall(t, s, "schedules_delete", map[string]any{"schedule_id": sch["id"]})["deleted"])
		require.Empty(t, mcpCall(t, s, "schedules_list", map[string]any{"workflow_id": wf["id"]})["schedules"])
		require.Equal(t, true, mcpCall(t, s, "workflows_delete", map[string]any{"workflow_id": wf["id"]})["deleted"])
		require.Equal(t, "not_found", mcpCallError(t, s, "workflows_get", map[string]any{"workflow_id": wf["id"]})["error"])

		// The catalog and the guide as resources.
		r, err := s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "svc://connectors"})
		require.NoError(t, err)
		require.Contains(t, r.Contents[0].Text, `"trigger.manual"`)
		r, err = s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "svc://guide"})
		require.NoError(t, err)
		require.Contains(t, r.Contents[0].Text, "workflows_patch")
	})

	t.Run("GuardAndRateLimit", func(t *testing.T) {
		t.Parallel()
		list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		mcpHeaders := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
		post := func(body string, hdr ...string) response {
			t.Helper()
			return call(t, http.MethodPost, sys.BaseURL+"/api/mcp", strings.NewReader(body), append(slices.Clone(mcpHeaders), hdr...)...)
		}
		// No credentials, or a key that is not one: 401 before anything MCP sees the request.
		requireError(t, post(list), http.StatusUnauthorized, "unauthorized")
		r := post(list, "Authorization", "Bearer svc_"+strings.Repeat("x", 64))
		require.Equal(t, http.StatusUnauthorized, r.Status, r.Raw)
		require.Empty(t, r.Header.Get("RateLimit-Limit"))

		// With a key: the bucket's headers, as on every guarded route.
		r = post(list, "X-Api-Key", keyA)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, "2000", r.Header.Get("RateLimit-Limit"))
		require.NotEmpty(t, r.Header.Get("RateLimit-Remaining"))
		require.Contains(t, r.Raw, `"workflows_patch"`)

		// Bad input is a client error, never a 500.
		for _, body := range []string{"", "{", "[]", `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":1,"method":"nope"}`, `"x"`, strings.Repeat("[", 10000)} {
			r := post(body, "X-Api-Key", keyA)
			require.Less(t, r.Status, 500, "%q: %s", body, r.Raw)
			require.NotEqual(t, http.StatusOK, r.Status, "%q: %s", body, r.Raw)
		}
		callBad := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"runs_get","arguments":{"run_id":42}}}`
		r = post(callBad, "X-Api-Key", keyA)
		require.Less(t, r.Status, 500, r.Raw)
		require.Contains(t, r.Raw, `"isError":true`)
		r = post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"runs_get","arguments":{"run_id":"../../api/mcp"}}}`, "X-Api-Key", keyA)
		require.Less(t, r.Status, 500, r.Raw)
		require.Contains(t, r.Raw, `"isError":true`)
		// The stream and session methods of stateful servers are not served.
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			r := call(t, m, sys.BaseURL+"/api/mcp", nil, "X-Api-Key", keyA, "Accept", "text/event-stream")
			require.Equal(t, http.StatusMethodNotAllowed, r.Status, "%s: %s", m, r.Raw)
		}
	})
}

// TestMCPWaitAtTheDefaultRateLimit waits with runs_wait for a run that sleeps 25 s, over both
// transports, at the default rate limit (60 a minute per organization and principal; the
// system is this test's own so nothing else spends the buckets): the wait ends with the run's
// end, the gateway refuses no request of the whole system, and the principal's bucket is still
// more than half full afterwards.
func TestMCPWaitAtTheDefaultRateLimit(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	sys := harness.Start(t, harness.Options{Env: map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin}})

	waitForTheEnd := func(t *testing.T, s *mcp.ClientSession, key, tag string) {
		t.Helper()
		wf := mcpCall(t, s, "workflows_create", map[string]any{"name": "mcp-nap-" + tag, "definition": map[string]any{
			"blocks": []any{
				map[string]any{"block_id": "start", "type": "trigger.manual"},
				map[string]any{"block_id": "nap", "type": "wait", "params": map[string]any{"duration": "25s"}},
				map[string]any{"block_id": "done", "type": "log", "params": map[string]any{"message": "awake"}},
			},
			"edges": []any{
				map[string]any{"block_id": "start", "target_block_id": "nap"},
				map[string]any{"block_id": "nap", "target_block_id": "done"},
			},
		}})
		require.Empty(t, wf["skipped_items"], wf)
		require.Empty(t, wf["validation_errors"], wf)
		runID := mcpCall(t, s, "runs_start", map[string]any{"workflow_id": wf["id"]})["runId"].(string)
		started := time.Now()

		// An agent's loop: wait until the run has finished. The sleep ends at most one call
		// (when it begins during it); the next waits it through.
		var w map[string]any
		calls := 0
		for calls < 3 {
			calls++
			w = mcpCall(t, s, "runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 60})
			if w["finished"] == true {
				break
			}
			require.Equal(t, true, w["waiting"], w)
			require.Equal(t, false, w["timed_out"], w)
			require.Equal(t, "sleep", obj(t, obj(t, w["run"])["waiting"])["kind"], w)
		}
		require.Equal(t, "completed", obj(t, w["run"])["status"], w)
		require.LessOrEqual(t, calls, 2, "one call per wait")
		require.Greater(t, time.Since(started), 20*time.Second, "it waited through the sleep")

		// The principal has tokens left: a following call succeeds, and the bucket is still
		// more than half full.
		require.Len(t, objs(t, mcpCall(t, s, "runs_logs", map[string]any{"run_id": runID})["attempts"]), 3)
		r := call(t, http.MethodGet, sys.BaseURL+"/api/runs/"+runID, nil, "X-Api-Key", key)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, "60", r.Header.Get("RateLimit-Limit"))
		left, err := strconv.Atoi(r.Header.Get("RateLimit-Remaining"))
		require.NoError(t, err, r.Header)
		require.Greater(t, left, 30, "tokens left after the wait")
		t.Logf("%s: the run ended after %s, seen in %d runs_wait calls; %d of 60 tokens left", tag, time.Since(started).Round(time.Second), calls, left)
	}

	t.Run("Waits", func(t *testing.T) {
		t.Run("Stdio", func(t *testing.T) {
			t.Parallel()
			key := apiKeyOf(t, newRunsUser(t, sys, "mcp-nap-stdio"))
			cmd := exec.Command(bin, "mcp")
			cmd.Env = append(environ(), "HOME="+t.TempDir(), "SVC_API="+sys.BaseURL, "SVC_API_KEY="+key)
			waitForTheEnd(t, mcpConnect(t, &mcp.CommandTransport{Command: cmd}), key, "stdio")
		})
		t.Run("HTTP", func(t *testing.T) {
			t.Parallel()
			key := apiKeyOf(t, newRunsUser(t, sys, "mcp-nap-http"))
			s := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: sys.BaseURL + "/api/mcp", HTTPClient: &http.Client{
				Timeout: 3 * time.Minute, Transport: headerTransport{name: "Authorization", value: "Bearer " + key}}})
			waitForTheEnd(t, s, key, "http")
		})
	})

	// Not one request of the system was refused with 429 (the gateway counts each refusal).
	r := call(t, http.MethodGet, sys.AdminURL+"/metrics", nil)
	require.Equal(t, http.StatusOK, r.Status)
	for _, line := range strings.Split(r.Raw, "\n") {
		if strings.HasPrefix(line, "svc_gateway_rate_limited_total") {
			fields := strings.Fields(line)
			require.Equal(t, "0", fields[len(fields)-1], "requests refused: %s", line)
		}
	}
}

// mcpBuildRunSignal is the agent's loop: a batch with a misspelled block type, repaired from
// the reply's hints alone; then a run that waits for a signal, the signal, and the logs.
func mcpBuildRunSignal(t *testing.T, s *mcp.ClientSession, tag string) {
	t.Helper()
	tools, err := s.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
	}
	require.Subset(t, names, []string{"connectors_list", "connector_describe", "workflows_list", "workflows_get", "workflows_create",
		"workflows_patch", "workflows_validate", "workflows_delete", "runs_start", "runs_get", "runs_list", "runs_logs", "runs_signal",
		"runs_cancel", "runs_wait", "schedules_list", "schedules_create", "schedules_update", "schedules_delete"})

	wf := mcpCall(t, s, "workflows_create", map[string]any{"name": "mcp-approval-" + tag, "description": "waits for an approval"})
	wfID := wf["id"].(string)
	ops := []map[string]any{
		{"operation_type": "add", "block_id": "start", "type": "trigger.manual"},
		{"operation_type": "add", "block_id": "approval", "type": "wiat", "params": map[string]any{"signal": "approve", "timeout": "10m"}},
		{"operation_type": "add", "block_id": "done", "type": "log", "params": map[string]any{"message": "approved by {{ steps.approval.output.signal.payload.by }}"}},
		{"operation_type": "connect", "block_id": "start", "target_block_id": "approval"},
		{"operation_type": "connect", "block_id": "approval", "target_block_id": "done"},
	}
	patched := mcpCall(t, s, "workflows_patch", map[string]any{"workflow_id": wfID, "ops": ops})
	skipped := objs(t, patched["skipped_items"])
	require.NotEmpty(t, skipped, patched)
	first := skipped[0]
	require.EqualValues(t, 1, first["operation_index"], first)
	require.Equal(t, "block_type_not_registered", first["reason_code"], first)
	require.Equal(t, "wait", obj(t, first["hint"])["did_you_mean"], first)
	require.NotEmpty(t, patched["validation_errors"], "the graph is not whole yet")

	// The repair uses nothing but the reply: each skipped operation again, with its hint's
	// did_you_mean put where the hint points; one without a hint (it failed only because of
	// an earlier one) again as it was.
	var repaired []map[string]any
	for _, item := range skipped {
		op := ops[int(item["operation_index"].(float64))]
		if hint, ok := item["hint"].(map[string]any); ok && hint["did_you_mean"] != nil {
			pointer, _ := hint["pointer"].(string)
			if pointer == "" {
				pointer = "/type"
			}
			op = setPointer(t, op, pointer, hint["did_you_mean"])
		}
		repaired = append(repaired, op)
	}
	again := mcpCall(t, s, "workflows_patch", map[string]any{"workflow_id": wfID, "ops": repaired, "if_match": patched["version"]})
	require.Empty(t, again["skipped_items"], again)
	require.Empty(t, again["validation_errors"], again)
	v := mcpCall(t, s, "workflows_validate", map[string]any{"workflow_id": wfID})
	require.Equal(t, true, v["valid"], v)
	got := mcpCall(t, s, "workflows_get", map[string]any{"workflow_id": wfID})
	require.Len(t, obj(t, got["definition"])["blocks"], 3)
	res, err := s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "svc://workflows/" + wfID})
	require.NoError(t, err)
	require.Contains(t, res.Contents[0].Text, `"approval"`)

	runID := mcpCall(t, s, "runs_start", map[string]any{"workflow_id": wfID, "input": map[string]any{"ticket": 7}})["runId"].(string)
	w := mcpCall(t, s, "runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 20})
	require.Equal(t, true, w["waiting"], w)
	waiting := obj(t, obj(t, w["run"])["waiting"])
	require.Equal(t, "signal", waiting["kind"])
	require.Equal(t, "approve", waiting["signal"])

	logs := mcpCall(t, s, "runs_logs", map[string]any{"run_id": runID})
	cursor, _ := logs["next_cursor"].(string)
	require.NotEmpty(t, cursor, logs)

	sig := mcpCall(t, s, "runs_signal", map[string]any{"run_id": runID, "name": waiting["signal"], "payload": map[string]any{"by": "ana"}})
	require.Equal(t, true, sig["delivered"], sig)
	w = mcpCall(t, s, "runs_wait", map[string]any{"run_id": runID, "timeout_seconds": 20})
	require.Equal(t, true, w["finished"], w)
	require.Equal(t, "completed", obj(t, w["run"])["status"], w)

	// From the start: every attempt once; after the cursor: the ones that changed since.
	all := objs(t, mcpCall(t, s, "runs_logs", map[string]any{"run_id": runID})["attempts"])
	byBlock := map[string]map[string]any{}
	for _, a := range all {
		require.Equal(t, "succeeded", a["status"], a)
		byBlock[a["block_id"].(string)] = a
	}
	require.Len(t, byBlock, 3, all)
	require.Equal(t, "approved by ana", obj(t, byBlock["done"]["input"])["message"], byBlock["done"])
	since := objs(t, mcpCall(t, s, "runs_logs", map[string]any{"run_id": runID, "after": cursor})["attempts"])
	require.NotEmpty(t, since)
	require.Less(t, len(since), len(all)+1)
	for _, a := range since {
		require.Contains(t, []any{"approval", "done"}, a["block_id"], "only what changed after the cursor")
	}

	listed := mcpCall(t, s, "runs_list", map[string]any{"workflow_id": wfID})
	require.Equal(t, []string{runID}, mcpIDs(t, listed["runs"], "runId"))

	// A finished run refuses a signal and a cancel with the contract's code.
	e := mcpCallError(t, s, "runs_cancel", map[string]any{"run_id": runID})
	require.Equal(t, "run_finished", e["error"], e)
	require.EqualValues(t, http.StatusConflict, e["status"], e)
}

// mcpConnect opens a client session and closes it when the test ends.
func mcpConnect(t *testing.T, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "svc-e2e", Version: "1"}, nil).Connect(ctx, transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mcpCall calls a tool that must succeed and returns its structured output.
func mcpCall(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	res := mcpCallResult(t, s, tool, args)
	require.False(t, res.IsError, "%s: %s", tool, mcpText(res))
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	return obj(t, decodeAny(t, string(b)))
}

// mcpCallError calls a tool that must fail and returns the error it reports.
func mcpCallError(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	res := mcpCallResult(t, s, tool, args)
	require.True(t, res.IsError, "%s: want a tool error, got %s", tool, mcpText(res))
	return obj(t, decodeAny(t, mcpText(res)))
}

func mcpCallResult(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, tool)
	return res
}

func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpIDs is the given member of each object of a list.
func mcpIDs(t *testing.T, list any, member string) []string {
	t.Helper()
	out := []string{}
	if list == nil {
		return out
	}
	for _, o := range objs(t, list) {
		s, _ := o[member].(string)
		out = append(out, s)
	}
	return out
}

// setPointer returns a copy of op with the value at a JSON Pointer ("/params/method") set.
func setPointer(t *testing.T, op map[string]any, pointer string, value any) map[string]any {
	t.Helper()
	b, err := json.Marshal(op)
	require.NoError(t, err)
	cp := obj(t, decodeAny(t, string(b)))
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	m := cp
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = value
	return cp
}

// apiKeyOf makes an API key of the user's organization.
func apiKeyOf(t *testing.T, u *runsUser) string {
	t.Helper()
	r := u.c.post("/api/auth/api-key/create", map[string]any{"name": "mcp"})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	key, _ := r.Body["key"].(string)
	require.NotEmpty(t, key, r.Raw)
	return key
}

// headerTransport sends one header on every request, as an MCP client configured with a
// credential does.
// headerTransport sets a header on every request, and Origin when origin is set (a
// cookie-authenticated write needs a trusted one, as a browser sends it).
type headerTransport struct{ name, value, origin string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	if h.origin != "" {
		r.Header.Set("Origin", h.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpOutputMap ties part of a tool's output schema to the API schema it comes from.
type mcpOutputMap struct {
	// tool is a JSON Pointer into the tool's output schema ("" for all of it), made of
	// /properties/<name> and /items steps.
	tool string
	// api names an API schema: "#/components/schemas/<name>", or "<operationId> <status>" for
	// the JSON schema of an answer; then, after a "#", a pointer into it of the same steps.
	api string
}

// mcpOutputs says, for every tool, where its output comes from in the API, and which of its
// top-level members are the tool's own (not API data, so not in any API schema).
var mcpOutputs = map[string]struct { //nolint:gochecknoglobals // test table
	maps []mcpOutputMap
	own  []string
}{
	"connectors_list":    {maps: []mcpOutputMap{{"/properties/connectors/items", "#/components/schemas/Connector"}}},
	"connector_describe": {maps: []mcpOutputMap{{"", "#/components/schemas/Connector"}}},
	"workflows_list": {maps: []mcpOutputMap{
		{"/properties/workflows/items", "listWorkflows 200#/properties/items/items"},
		{"/properties/next_cursor", "listWorkflows 200#/properties/nextCursor"},
	}},
	"workflows_get":    {maps: []mcpOutputMap{{"", "#/components/schemas/Workflow"}}},
	"workflows_create": {maps: []mcpOutputMap{{"", "createWorkflow 201"}}},
	// workflow_id echoes the argument, so the answer says which workflow it is about.
	"workflows_patch": {maps: []mcpOutputMap{{"", "editWorkflow 200"}}, own: []string{"workflow_id"}},
	"workflows_validate": {maps: []mcpOutputMap{
		{"/properties/workflow_id", "getWorkflow 200#/properties/id"},
		{"/properties/version", "getWorkflow 200#/properties/version"},
		{"/properties/validation_errors", "getWorkflow 200#/properties/validation_errors"},
	}, own: []string{"valid"}},
	"workflows_delete": {own: []string{"id", "deleted"}}, // the API answers 204
	"runs_start":       {maps: []mcpOutputMap{{"", "startRun 202"}}},
	"runs_get":         {maps: []mcpOutputMap{{"", "getRun 200"}}},
	"runs_list": {maps: []mcpOutputMap{
		{"/properties/runs/items", "listRuns 200#/properties/items/items"},
		{"/properties/next_cursor", "listRuns 200#/properties/nextCursor"},
	}},
	"runs_logs": {maps: []mcpOutputMap{
		{"/properties/attempts/items", "getRunLogs 200#/properties/items/items"},
		{"/properties/next_cursor", "getRunLogs 200#/properties/nextCursor"},
	}},
	"runs_signal": {maps: []mcpOutputMap{{"", "signalRun 202"}}},
	"runs_cancel": {maps: []mcpOutputMap{{"", "cancelRun 202"}}},
	// finished, waiting and timed_out say why the wait ended.
	"runs_wait": {maps: []mcpOutputMap{{"/properties/run", "getRun 200"}}, own: []string{"finished", "waiting", "timed_out"}},
	"schedules_list": {maps: []mcpOutputMap{
		{"/properties/schedules/items", "listSchedules 200#/properties/items/items"},
		{"/properties/next_cursor", "listSchedules 200#/properties/nextCursor"},
	}},
	"schedules_create": {maps: []mcpOutputMap{{"", "createSchedule 201"}}},
	"schedules_update": {maps: []mcpOutputMap{{"", "updateSchedule 200"}}},
	"schedules_delete": {own: []string{"id", "deleted"}}, // the API answers 204
}

// TestMCPOutputSchemasMatchTheAPI holds the tools' output schemas (built from Go types in
// clients/apiclient and clients/mcptools) to the OpenAPI document the route tests hold the routers
// to, proto/openapi/svc.yaml: every member a tool's output declares is a member of the API
// schema it comes from (or one of the tool's own, listed in mcpOutputs), with a JSON type the
// API's allows, at every depth where the API lists members. It starts no system.
func TestMCPOutputSchemasMatchTheAPI(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../proto/openapi/svc.yaml")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(src, &doc))
	spec := openAPISchemas{doc: doc}

	c, err := apiclient.NewClient("http://127.0.0.1:1", &http.Client{}, "test")
	require.NoError(t, err)
	server := mcptools.NewServer(mcptools.Config{Principal: mcptools.Fixed(c, "svc_test")})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	defer func() { _ = ss.Close() }()
	cs := mcpConnect(t, ct)
	tools, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)

	require.Len(t, tools.Tools, len(mcpOutputs), "every tool has an entry in mcpOutputs")
	for _, tool := range tools.Tools {
		t.Run(tool.Name, func(t *testing.T) {
			entry, ok := mcpOutputs[tool.Name]
			require.True(t, ok, "%s has no entry in mcpOutputs: say which API schema its output comes from", tool.Name)
			b, err := json.Marshal(tool.OutputSchema)
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.Unmarshal(b, &out))
			ts := toolSchema{root: out}

			// Every top-level member is covered: by a map of the whole output, by a map of
			// that member, or as the tool's own.
			covered := map[string]bool{}
			for _, name := range entry.own {
				covered[name] = true
			}
			whole := false
			for _, m := range entry.maps {
				if m.tool == "" {
					whole = true
					continue
				}
				name, _, _ := strings.Cut(strings.TrimPrefix(m.tool, "/properties/"), "/")
				covered[name] = true
			}
			for name := range schemaProps(ts.resolve(out)) {
				require.True(t, whole || covered[name], "%s: member %q of the output is neither API data nor listed as the tool's own", tool.Name, name)
			}
			for _, m := range entry.maps {
				api := spec.at(t, m.api)
				own := map[string]bool{}
				if m.tool == "" {
					for _, name := range entry.own {
						own[name] = true
					}
				}
				requireWithin(t, ts, ts.at(t, m.tool), api, spec, tool.Name+m.tool, own)
			}
		})
	}
}

// openAPISchemas reads schemas out of the OpenAPI document.
type openAPISchemas struct{ doc map[string]any }

// at is the schema named as in mcpOutputMap.api.
func (o openAPISchemas) at(t *testing.T, name string) map[string]any {
	t.Helper()
	base, pointer, _ := strings.Cut(name, "#")
	var s map[string]any
	if base == "" {
		s = o.ref(t, "#"+pointer)
		pointer = ""
	} else {
		opID, status, _ := strings.Cut(base, " ")
		s = o.response(t, opID, status)
	}
	return walkPointer(t, s, pointer, o.merge)
}

func (o openAPISchemas) ref(t *testing.T, ref string) map[string]any {
	t.Helper()
	require.True(t, strings.HasPrefix(ref, "#/components/schemas/"), "ref %s", ref)
	s, ok := obj(t, obj(t, o.doc["components"])["schemas"])[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	require.True(t, ok, "no schema %s in svc.yaml", ref)
	return s
}

func (o openAPISchemas) response(t *testing.T, opID, status string) map[string]any {
	t.Helper()
	for _, item := range obj(t, o.doc["paths"]) {
		for _, op := range obj(t, item) {
			op, ok := op.(map[string]any)
			if !ok || op["operationId"] != opID {
				continue
			}
			res := obj(t, obj(t, op["responses"])[status])
			return obj(t, obj(t, obj(t, res["content"])["application/json"])["schema"])
		}
	}
	t.Fatalf("no operation %s in svc.yaml", opID)
	return nil
}

// merge resolves a $ref and folds allOf into one schema: the members of all, and the type
// of the first part that has one.
func (o openAPISchemas) merge(t *testing.T, s map[string]any) map[string]any {
	t.Helper()
	if ref, ok := s["$ref"].(string); ok {
		return o.merge(t, o.ref(t, ref))
	}
	all, ok := s["allOf"].([]any)
	if !ok {
		return s
	}
	out := map[string]any{}
	props := map[string]any{}
	for k, v := range s {
		if k != "allOf" {
			out[k] = v
		}
	}
	for _, part := range all {
		p := o.merge(t, obj(t, part))
		for name, ps := range schemaProps(p) {
			props[name] = ps
		}
		if _, ok := out["type"]; !ok && p["type"] != nil {
			out["type"] = p["type"]
		}
	}
	out["properties"] = props
	return out
}

// toolSchema is a tool's output schema, whose $refs point into its own $defs.
type toolSchema struct{ root map[string]any }

func (ts toolSchema) resolve(s map[string]any) map[string]any {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		defs, _ := ts.root["$defs"].(map[string]any)
		next, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		if !ok {
			return s
		}
		s = next
	}
}

func (ts toolSchema) at(t *testing.T, pointer string) map[string]any {
	t.Helper()
	return walkPointer(t, ts.root, pointer, func(_ *testing.T, s map[string]any) map[string]any { return ts.resolve(s) })
}

// walkPointer follows /properties/<name> and /items steps.
func walkPointer(t *testing.T, s map[string]any, pointer string, resolve func(*testing.T, map[string]any) map[string]any) map[string]any {
	t.Helper()
	steps := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i := 0; pointer != "" && i < len(steps); i++ {
		s = resolve(t, s)
		switch steps[i] {
		case "properties":
			i++
			require.Less(t, i, len(steps), "pointer %s", pointer)
			next, ok := schemaProps(s)[steps[i]].(map[string]any)
			require.True(t, ok, "pointer %s: no member %s", pointer, steps[i])
			s = next
		case "items":
			next, ok := s["items"].(map[string]any)
			require.True(t, ok, "pointer %s: no items", pointer)
			s = next
		default:
			t.Fatalf("pointer %s: step %s", pointer, steps[i])
		}
	}
	return resolve(t, s)
}

func schemaProps(s map[string]any) map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

// requireWithin checks that what the tool's schema declares, the API's declares too: each
// member (but own, at this level) with a compatible type, down to where the API stops listing
// members (an open object such as params or a run's error).
func requireWithin(t *testing.T, ts toolSchema, tool, api map[string]any, spec openAPISchemas, where string, own map[string]bool) {
	t.Helper()
	tool, api = ts.resolve(tool), spec.merge(t, api)
	toolTypes, apiTypes := jsonTypes(tool), jsonTypes(api)
	if len(toolTypes) > 0 && len(apiTypes) > 0 {
		for _, ty := range toolTypes {
			ok := slices.Contains(apiTypes, ty) || ty == "integer" && slices.Contains(apiTypes, "number")
			require.True(t, ok, "%s: the tool says %v, the API %v", where, toolTypes, apiTypes)
		}
	}
	if apiProps := schemaProps(api); apiProps != nil {
		for name, p := range schemaProps(tool) {
			if own[name] {
				continue
			}
			ap, ok := apiProps[name].(map[string]any)
			require.True(t, ok, "%s: the tool declares member %q, which the API's schema does not have (it has %v)", where, name, slices.Sorted(maps.Keys(apiProps)))
			requireWithin(t, ts, obj(t, p), ap, spec, where+"."+name, nil)
		}
	}
	if items, ok := tool["items"].(map[string]any); ok {
		if apiItems, ok := api["items"].(map[string]any); ok {
			requireWithin(t, ts, items, apiItems, spec, where+"[]", nil)
		}
	}
}

// jsonTypes is the JSON types a schema allows, from type, const or enum; none when it says
// nothing (any value). null is left out: Go's slices and pointers make a tool's member
// nullable in its schema where the tool itself leaves the member out.
func jsonTypes(s map[string]any) []string {
	var out []string
	add := func(ty string) {
		if ty != "null" && !slices.Contains(out, ty) {
			out = append(out, ty)
		}
	}
	switch ty := s["type"].(type) {
	case string:
		add(ty)
	case []any:
		for _, v := range ty {
			if s, ok := v.(string); ok {
				add(s)
			}
		}
	}
	values, _ := s["enum"].([]any)
	if c, ok := s["const"]; ok {
		values = append(values, c)
	}
	if s["type"] == nil {
		for _, v := range values {
			switch v.(type) {
			case string:
				add("string")
			case bool:
				add("boolean")
			case int, int64, float64:
				add("number")
			}
		}
	}
	return out
}
