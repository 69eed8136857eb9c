package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestCLIHousekeeping drives the svc commands of issue 14 against the real system: the
// connector catalog, deleting a workflow, creating one from an ops file with skipped
// operations, a refused run's validation errors, and a login that keeps its key until
// logout --revoke revokes it.
func TestCLIHousekeeping(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	sys := harness.Start(t, harness.Options{TrustGateway: true, Env: map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"}})
	api := sys.BaseURL

	t.Run("Connectors", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-connectors")
		var list []map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("connectors").stdout), &list))
		types := map[string]map[string]any{}
		for _, it := range list {
			types[it["type"].(string)] = it
		}
		for _, want := range []string{"trigger.manual", "trigger.webhook", "trigger.schedule", "http.request", "transform", "condition", "wait", "log", "fail"} {
			require.Contains(t, types, want)
		}
		require.Equal(t, "action", types["http.request"]["category"])
		require.Contains(t, types["http.request"], "output_schema", "JSON is the catalog as the API sends it")
		table := c.ok("connectors", "-o", "table").stdout
		require.Regexp(t, `(?m)^TYPE\s+CATEGORY\s+TITLE\s+PARAMS$`, table)
		require.Regexp(t, `(?m)^http\.request\s+action\s+.*method\*, url\*`, table)
		require.NotContains(t, table, "allow_private_network", "hidden params are never listed")
	})

	// Through the gateway, the identity's role reaches the orchestrator: the owner who logged
	// in may change the organization's retention period.
	t.Run("Retention", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-retention")
		got := obj(t, decodeAny(t, c.ok("retention").stdout))
		require.Nil(t, got["runRetention"])
		require.Equal(t, "720h", got["serverRetention"])
		got = obj(t, decodeAny(t, c.ok("retention", "--set", "7d").stdout))
		require.Equal(t, "168h", got["runRetention"])
		require.Equal(t, "168h", got["effectiveRetention"])
		require.Regexp(t, `kept for 168h \(organization's period: 168h; server's: 720h\)`, c.ok("retention", "-o", "table").stdout)
		bad := c.run("retention", "--set", "9999h")
		require.Equal(t, 1, bad.code, bad)
		require.Contains(t, bad.stderr, "invalid_body")
		got = obj(t, decodeAny(t, c.ok("retention", "--reset").stdout))
		require.Nil(t, got["runRetention"])
	})

	t.Run("WorkflowsDelete", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-delete")
		id := c.workflow("doomed", `{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}}],"edges":[]}`)
		require.Equal(t, map[string]any{"id": id, "deleted": true}, obj(t, decodeAny(t, c.ok("workflows", "delete", id).stdout)))
		gone := c.run("workflows", "get", id)
		require.Equal(t, 1, gone.code, gone)
		require.Contains(t, gone.stderr, "HTTP 404")
		again := c.run("workflows", "delete", id)
		require.Equal(t, 1, again.code, again)
		require.Contains(t, again.stderr, "not_found")
		require.Equal(t, "[]", strings.TrimSpace(c.ok("workflows", "list").stdout))
	})

	t.Run("CreateFromOpsWithSkipsExitsOne", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-skips")
		ops := writeFile(t, `{"ops":[
			{"operation_type":"add","block_id":"start","type":"trigger.manual","params":{}},
			{"operation_type":"add","block_id":"say","type":"no.such.type","params":{}},
			{"operation_type":"add","block_id":"hi","type":"log","params":{"message":"hi"}},
			{"operation_type":"connect","block_id":"start","target_block_id":"hi"}
		]}`)
		res := c.run("workflows", "create", "--name", "partly", "-f", ops)
		require.Equal(t, 1, res.code, res)
		wf := obj(t, decodeAny(t, res.stdout))
		id := wf["id"].(string)
		require.Regexp(t, `^wf_`, id)
		skipped := objs(t, wf["skipped_items"])
		require.Len(t, skipped, 1, res.stdout)
		require.Equal(t, "block_type_not_registered", skipped[0]["reason_code"])
		require.EqualValues(t, 1, skipped[0]["operation_index"])
		require.Contains(t, res.stderr, "workflow "+id+" was created, but 1 operation(s)")
		// What applied is there: the workflow exists with the three good operations.
		got := obj(t, decodeAny(t, c.ok("workflows", "get", id).stdout))
		require.Len(t, arr(t, obj(t, got["definition"])["blocks"]), 2)
		require.EqualValues(t, 2, got["version"])

		// Without a skip, exit 0 (and the same command, as a table).
		clean := writeFile(t, `[{"operation_type":"add","block_id":"start","type":"trigger.manual","params":{}}]`)
		out := c.ok("workflows", "create", "--name", "clean", "-f", clean, "-o", "table").stdout
		require.Contains(t, out, "Created workflow ")
		require.Contains(t, out, `("clean"), version 2.`)

		// A batch refused whole leaves no workflow: the same name can be used again.
		tooMany := writeFile(t, `{"ops":`+strings.Repeat("[", 1)+strings.TrimSuffix(strings.Repeat(`{"operation_type":"remove","block_id":"x"},`, 501), ",")+`]}`)
		refused := c.run("workflows", "create", "--name", "refused", "-f", tooMany)
		require.Equal(t, 1, refused.code, refused)
		require.Contains(t, refused.stderr, "invalid_body")
		for _, w := range objs(t, decodeAny(t, c.ok("workflows", "list").stdout)) {
			require.NotEqual(t, "refused", w["name"])
		}
	})

	t.Run("RefusedRunPrintsValidationErrors", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-refused")
		wf := obj(t, decodeAny(t, c.ok("workflows", "create", "--name", "no-trigger", "-f",
			writeFile(t, `{"blocks":[{"block_id":"say","type":"log","params":{"message":"hi"}}],"edges":[]}`)).stdout))
		id := wf["id"].(string)
		require.NotEmpty(t, wf["validation_errors"])
		res := c.run("run", id, "--follow")
		require.Equal(t, 1, res.code, res)
		require.Empty(t, res.stdout)
		require.Contains(t, res.stderr, "svc: workflow_invalid")
		require.Contains(t, res.stderr, "(HTTP 400)")
		require.Contains(t, res.stderr, "Validation errors (the workflow cannot run until they are fixed):")
		require.Contains(t, res.stderr, "  no_trigger")
		require.Contains(t, res.stderr, "svc ops apply "+id)
	})

	t.Run("LoginKeepsItsKeyUntilLogoutRevoke", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		email, password := uniqueEmail("cli-keep"), "correct horse battery"
		login := []string{"login", "--email", email, "--password", password, "--non-interactive"}
		first := obj(t, decodeAny(t, c.ok(login...).stdout))
		require.Equal(t, false, first["apiKeyReused"])
		s1 := requireSession(t, readCredentials(t, c.credsPath), api)

		// Again and again: the same key, and still one key on the server.
		for range 2 {
			again := obj(t, decodeAny(t, c.ok(login...).stdout))
			require.Equal(t, true, again["apiKeyReused"], again)
			require.Equal(t, first["apiKeyId"], again["apiKeyId"])
			require.Equal(t, first["apiKeyName"], again["apiKeyName"])
		}
		s2 := requireSession(t, readCredentials(t, c.credsPath), api)
		require.Equal(t, s1["apiKey"], s2["apiKey"])
		require.NotEqual(t, s1["sessionCookie"], s2["sessionCookie"], "the session is the new sign-in's")
		var keys []map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("key", "list").stdout), &keys))
		require.Len(t, keys, 1, "logins no longer pile up keys")

		// A key that stopped working is replaced at the next login.
		c.ok("key", "revoke", s2["apiKeyId"].(string))
		third := obj(t, decodeAny(t, c.ok(login...).stdout))
		require.Equal(t, false, third["apiKeyReused"])
		require.NotEqual(t, first["apiKeyId"], third["apiKeyId"])
		s3 := requireSession(t, readCredentials(t, c.credsPath), api)
		c.ok("workflows", "list")

		// logout --revoke: the key is refused from the next request on, the session is signed
		// out, and the entry is gone.
		out := obj(t, decodeAny(t, c.ok("logout", "--revoke").stdout))
		require.Equal(t, map[string]any{"api": api, "removed": true, "revokedApiKeyId": s3["apiKeyId"]}, out)
		requireError(t, call(t, "GET", api+"/api/workflows", nil, "Authorization", "Bearer "+s3["apiKey"].(string)), http.StatusUnauthorized, "unauthorized")
		session := call(t, "GET", api+"/api/auth/get-session", nil, "Cookie", s3["sessionCookie"].(string))
		require.Equal(t, http.StatusOK, session.Status, session.Raw)
		require.Equal(t, "null", strings.TrimSpace(session.Raw), "the session was signed out")
		require.Empty(t, obj(t, readCredentials(t, c.credsPath)["sessions"]))
	})
}
