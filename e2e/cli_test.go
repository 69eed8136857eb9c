package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"svc.dev/e2e/harness"
)

// TestCLI drives the svc binary, built from this checkout, against the real system: every
// subtest has its own HOME and credentials file and its own user (its own organization).
func TestCLI(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	// TrustGateway: the CLI sends its API address as Origin, as a real deployment would have
	// it trusted (SVC_PUBLIC_URL); the system also answers as http://localhost:<port>.
	sys := harness.Start(t, harness.Options{TrustGateway: true})
	api := sys.BaseURL
	apiLocalhost := strings.Replace(api, "127.0.0.1", "localhost", 1)

	t.Run("LoginSignsUpThenSignsIn", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		// No SVC_CREDENTIALS: the file is ~/.svc/credentials.json.
		c.credsPath = ""
		email, password := uniqueEmail("cli-login"), "correct horse battery"

		first := c.ok("login", "--email", email, "--password", password, "--non-interactive")
		out := obj(t, decodeAny(t, first.stdout))
		require.Equal(t, true, out["signedUp"], first.stdout)
		require.Equal(t, email, out["userEmail"])
		require.Regexp(t, `^personal-[a-z0-9]{8}$`, out["organizationSlug"])
		require.Equal(t, api, out["api"])
		path := filepath.Join(c.home, ".svc", "credentials.json")
		require.Equal(t, path, out["credentials"])

		file := readCredentials(t, path)
		s1 := requireSession(t, file, api)
		require.Equal(t, api, file["default"])
		require.Equal(t, email, s1["userEmail"])
		require.Equal(t, out["userId"], s1["userId"])
		require.Equal(t, out["organizationSlug"], s1["organizationSlug"])
		require.Equal(t, out["apiKeyId"], s1["apiKeyId"])
		info, err := os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "~/.svc is private")

		// The saved key works on the API at once; the key is named after the host.
		require.Equal(t, "[]", strings.TrimSpace(c.ok("workflows", "list").stdout))
		host, err := os.Hostname()
		require.NoError(t, err)
		require.Equal(t, host, out["apiKeyName"])

		// The second time, the same user signs in: no new account, and the saved key still
		// works, so it is kept (a fresh session is saved with it).
		second := c.ok("login", "--email", email, "--password", password, "--non-interactive")
		out2 := obj(t, decodeAny(t, second.stdout))
		require.Equal(t, false, out2["signedUp"], second.stdout)
		require.Equal(t, out["userId"], out2["userId"])
		require.Equal(t, out["organizationSlug"], out2["organizationSlug"])
		require.Equal(t, out["apiKeyId"], out2["apiKeyId"])
		require.Equal(t, true, out2["apiKeyReused"])
		s2 := requireSession(t, readCredentials(t, path), api)
		require.Equal(t, out2["apiKeyId"], s2["apiKeyId"])
		require.Equal(t, s1["apiKey"], s2["apiKey"])
		require.NotEqual(t, s1["sessionCookie"], s2["sessionCookie"])

		// A wrong password is an API error, printed with its code: exit 1, the file untouched.
		bad := c.run("login", "--email", email, "--password", "wrong password", "--non-interactive")
		require.Equal(t, 1, bad.code, bad)
		require.Contains(t, bad.stderr, "INVALID_CREDENTIALS")
		require.Contains(t, bad.stderr, "HTTP 401")
		require.Equal(t, s2, requireSession(t, readCredentials(t, path), api))
	})

	t.Run("LoginWithOrgName", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		email, password := uniqueEmail("cli-org"), "correct horse battery"
		suffix := strings.TrimSuffix(strings.SplitN(email, "-", 3)[2], "@example.com") // "<seq>-<hex>"
		name := "Acme CLI " + suffix
		out := obj(t, decodeAny(t, c.ok("login", "--email", email, "--password", password, "--non-interactive", "--org-name", name).stdout))
		require.Equal(t, true, out["signedUp"])
		slug := out["organizationSlug"].(string)
		require.Equal(t, "acme-cli-"+suffix, slug, "the slug is made from the name")
		s := requireSession(t, readCredentials(t, c.credsPath), api)

		// The key belongs to that organization: a workflow made with it is not in the personal one.
		c.workflow("acme-only", `{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}}],"edges":[]}`)
		personal := c.with("SVC_CREDENTIALS=" + filepath.Join(t.TempDir(), "personal.json"))
		p := obj(t, decodeAny(t, personal.ok("login", "--email", email, "--password", password, "--non-interactive").stdout))
		require.Regexp(t, `^personal-[a-z0-9]{8}$`, p["organizationSlug"])
		require.Equal(t, "[]", strings.TrimSpace(personal.ok("workflows", "list").stdout))
		require.Contains(t, c.ok("workflows", "list").stdout, "acme-only")

		// The same name again: the same organization, not a second one.
		again := obj(t, decodeAny(t, c.ok("login", "--email", email, "--password", password, "--non-interactive", "--org-name", name).stdout))
		require.Equal(t, s["organizationId"], again["organizationId"])
		require.Equal(t, slug, again["organizationSlug"])
	})

	t.Run("TokenEnvWhoami", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		email := c.login("cli-env")
		s := requireSession(t, readCredentials(t, c.credsPath), api)
		key := s["apiKey"].(string)

		require.Equal(t, key+"\n", c.ok("token").stdout)

		require.Equal(t, "export SVC_API_KEY='"+key+"'\nexport SVC_API='"+api+"'\n", c.ok("env").stdout)
		require.Equal(t, c.ok("env").stdout, c.ok("env", "--shell", "sh").stdout)
		require.Equal(t, "set -gx SVC_API_KEY '"+key+"';\nset -gx SVC_API '"+api+"';\n", c.ok("env", "--shell", "fish").stdout)
		require.Equal(t, "$env:SVC_API_KEY = '"+key+"'\n$env:SVC_API = '"+api+"'\n", c.ok("env", "--shell", "powershell").stdout)
		// The sh form is real sh: evaluated, it sets both variables, and the CLI then works from
		// them alone, without the credentials file.
		sh := exec.Command("sh", "-c", `eval "$("$0" env)" && printf '%s\n%s\n' "$SVC_API_KEY" "$SVC_API" && SVC_CREDENTIALS=/nonexistent/credentials.json "$0" workflows list`, bin)
		sh.Env = c.environ()
		got, err := sh.CombinedOutput()
		require.NoError(t, err, string(got))
		require.Equal(t, key+"\n"+api+"\n[]\n", string(got))

		bad := c.run("env", "--shell", "zsh")
		require.Equal(t, 2, bad.code, bad)
		require.Contains(t, bad.stderr, `invalid --shell "zsh"`)

		who := obj(t, decodeAny(t, c.ok("whoami").stdout))
		require.Equal(t, email, who["email"])
		require.Equal(t, s["organizationSlug"], who["organizationSlug"])
		require.Equal(t, api, who["api"])
		table := c.ok("whoami", "-o", "table").stdout
		for _, want := range []string{email, s["organizationSlug"].(string), api} {
			require.Contains(t, table, want)
		}

		// Another API has no login: the commands say so, exit 1.
		other := c.run("token", "--api", apiLocalhost)
		require.Equal(t, 1, other.code, other)
		require.Contains(t, other.stderr, "not logged in to "+apiLocalhost)
		require.Empty(t, other.stdout)
	})

	t.Run("KeyCreateListRevoke", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-keys")
		own := requireSession(t, readCredentials(t, c.credsPath), api)

		created := obj(t, decodeAny(t, c.ok("key", "create", "--name", "ci").stdout))
		raw, _ := created["key"].(string)
		require.Regexp(t, `^svc_[A-Za-z]{64}$`, raw)
		require.Equal(t, "ci", created["name"])
		require.Equal(t, raw[:6], created["start"])
		require.Equal(t, own["organizationId"], created["referenceId"])
		id := created["id"].(string)

		// Listings never show a raw key: not the new one, not the CLI's own.
		for _, format := range []string{"json", "table"} {
			list := c.ok("key", "list", "-o", format).stdout
			require.NotContains(t, list, raw[6:])
			require.NotContains(t, list, own["apiKey"].(string)[6:])
			require.Contains(t, list, id)
		}
		var keys []map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("key", "list").stdout), &keys))
		require.Len(t, keys, 2)
		byID := map[string]map[string]any{}
		for _, k := range keys {
			require.ElementsMatch(t, []string{"id", "name", "start", "createdAt", "lastRequest"}, mapKeys(k))
			byID[k["id"].(string)] = k
		}
		require.Equal(t, "ci", byID[id]["name"])
		require.Equal(t, raw[:6], byID[id]["start"])
		require.Contains(t, byID, own["apiKeyId"])

		// The new key works through SVC_API_KEY; revoked, the API refuses it on the next request.
		withKey := c.with("SVC_API_KEY=" + raw)
		require.Equal(t, "[]", strings.TrimSpace(withKey.ok("workflows", "list").stdout))
		revoked := obj(t, decodeAny(t, c.ok("key", "revoke", id).stdout))
		require.Equal(t, map[string]any{"id": id, "revoked": true}, revoked)
		refused := withKey.run("workflows", "list")
		require.Equal(t, 1, refused.code, refused)
		require.Contains(t, refused.stderr, "unauthorized")
		require.Contains(t, refused.stderr, "HTTP 401")
		// Straight to the API too, and the key is gone from the list; the CLI's own key still works.
		probe := call(t, "GET", api+"/api/workflows", nil, "Authorization", "Bearer "+raw)
		requireError(t, probe, http.StatusUnauthorized, "unauthorized")
		require.NotContains(t, c.ok("key", "list").stdout, id)
		c.ok("workflows", "list")

		again := c.run("key", "revoke", id)
		require.Equal(t, 1, again.code, again)
		require.Contains(t, again.stderr, "KEY_NOT_FOUND")

		// A key cannot manage keys, and key commands need the saved session, not SVC_API_KEY.
		missing := c.run("key", "create")
		require.Equal(t, 2, missing.code, missing)
		require.Contains(t, missing.stderr, "--name is required")
	})

	t.Run("LogoutRemovesOnlyThatAPI", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		email, password := uniqueEmail("cli-logout"), "correct horse battery"
		c.ok("login", "--email", email, "--password", password, "--non-interactive")
		// The same system under a second address: a second API entry side by side.
		c.ok("login", "--api", apiLocalhost, "--email", email, "--password", password, "--non-interactive")
		file := readCredentials(t, c.credsPath)
		require.Equal(t, apiLocalhost, file["default"], "the last login is the default")
		first, second := requireSession(t, file, api), requireSession(t, file, apiLocalhost)
		require.NotEqual(t, first["apiKey"], second["apiKey"])
		require.Len(t, obj(t, file["sessions"]), 2)

		// Without --api or SVC_API, commands go to the default (the last login).
		d := c.without("SVC_API")
		require.Equal(t, apiLocalhost, obj(t, decodeAny(t, d.ok("whoami").stdout))["api"])

		out := obj(t, decodeAny(t, c.ok("logout", "--api", apiLocalhost).stdout))
		require.Equal(t, map[string]any{"api": apiLocalhost, "removed": true}, out)
		file = readCredentials(t, c.credsPath)
		require.Len(t, obj(t, file["sessions"]), 1)
		require.Equal(t, first, requireSession(t, file, api), "the other API's entry is untouched")
		require.Equal(t, api, file["default"], "the default moves to the remaining API")
		requireMode0600(t, c.credsPath)

		gone := c.run("token", "--api", apiLocalhost)
		require.Equal(t, 1, gone.code, gone)
		require.Equal(t, first["apiKey"].(string)+"\n", c.ok("token").stdout)
		// Logout is local: the removed entry's key still works on the server.
		requireError(t, call(t, "GET", api+"/api/nope", nil, "Authorization", "Bearer "+second["apiKey"].(string)), http.StatusNotFound, "not_found")

		again := obj(t, decodeAny(t, c.ok("logout", "--api", apiLocalhost).stdout))
		require.Equal(t, false, again["removed"])
		c.ok("logout")
		file = readCredentials(t, c.credsPath)
		require.Empty(t, obj(t, file["sessions"]))
		require.Equal(t, "", file["default"])
	})

	t.Run("WorkflowsAndOps", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-wf")
		def := writeFile(t, `{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}}],"edges":[]}`)
		wf := obj(t, decodeAny(t, c.ok("workflows", "create", "--name", "hello", "--description", "from the CLI", "-f", def).stdout))
		id := wf["id"].(string)
		require.Regexp(t, `^wf_`, id)
		require.EqualValues(t, 1, wf["version"])

		dup := c.run("workflows", "create", "--name", "hello")
		require.Equal(t, 1, dup.code, dup)
		require.Contains(t, dup.stderr, "workflow_name_taken")

		var list []map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("workflows", "list").stdout), &list))
		require.Len(t, list, 1)
		require.Equal(t, id, list[0]["id"])
		require.Contains(t, c.ok("workflows", "list", "-o", "table").stdout, "hello")

		ops := writeFile(t, `[
			{"operation_type":"add","block_id":"say","type":"log","params":{"message":"hi"}},
			{"operation_type":"add","block_id":"bad","type":"no.such.type","params":{}},
			{"operation_type":"connect","block_id":"bad","target_block_id":"say"},
			{"operation_type":"connect","block_id":"start","target_block_id":"say"}
		]`)
		applied := c.ok("ops", "apply", id, "-f", ops, "--if-match", "1", "-o", "table").stdout
		require.Contains(t, applied, "Applied 2 of 4 operation(s), skipped 2; workflow "+id+" is at version 2.")
		require.Contains(t, applied, "#1 add bad: block_type_not_registered")
		require.Contains(t, applied, "#2 connect bad: invalid_edge_source")

		stale := c.run("ops", "apply", id, "-f", ops, "--if-match", "1")
		require.Equal(t, 1, stale.code, stale)
		require.Contains(t, stale.stderr, "version_mismatch")
		require.Contains(t, stale.stderr, "HTTP 412")
		require.Contains(t, stale.stderr, "version 2 now")

		// JSON output is the API's answer; {"ops": [...]} from stdin works too.
		res := c.okIn(`{"ops":[{"operation_type":"update","block_id":"say","params":{"message":"hello"}}]}`, "ops", "apply", id, "-f", "-")
		body := obj(t, decodeAny(t, res.stdout))
		require.Equal(t, true, body["ok"])
		require.EqualValues(t, 3, body["version"])

		got := obj(t, decodeAny(t, c.ok("workflows", "get", id).stdout))
		require.EqualValues(t, 3, got["version"])
		require.Len(t, arr(t, obj(t, got["definition"])["blocks"]), 2)
		require.Contains(t, c.ok("workflows", "get", id, "-o", "table").stdout, `"message": "hello"`)

		missing := c.run("workflows", "get", "wf_doesnotexist")
		require.Equal(t, 1, missing.code, missing)
		require.Contains(t, missing.stderr, "not_found")
		require.Contains(t, missing.stderr, "HTTP 404")
	})

	t.Run("RunFollowOfAFailingStepShowsEveryAttempt", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-fail")
		id := c.workflow("failing", `{"blocks":[
			{"block_id":"start","type":"trigger.manual","params":{}},
			{"block_id":"boom","type":"fail","params":{"message":"kaboom"}}
		],"edges":[{"block_id":"start","target_block_id":"boom"}]}`)

		res := c.run("run", id, "--input", `{"n":1}`, "--follow")
		require.Equal(t, 1, res.code, res)
		lines := jsonLines(t, res.stdout)
		require.GreaterOrEqual(t, len(lines), 3, res.stdout)
		runID := lines[0]["runId"].(string)
		require.Regexp(t, `^run_`, runID)
		final := lines[len(lines)-1]
		require.Equal(t, runID, final["runId"])
		require.Equal(t, "failed", final["status"])
		require.Contains(t, res.stderr, "run "+runID+" failed: block boom: kaboom")

		// Every attempt of boom is shown in its final state: three failures (retry policy).
		last := map[float64]string{}
		for _, l := range lines[1 : len(lines)-1] {
			if l["block_id"] == "boom" {
				last[l["attempt"].(float64)] = l["status"].(string)
				if l["status"] == "failed" {
					require.Contains(t, obj(t, l["error"])["message"], "kaboom")
				}
			}
		}
		require.Equal(t, map[float64]string{1: "failed", 2: "failed", 3: "failed"}, last, res.stdout)

		// The table form of the same follow, on the ended run: exit 1, one line per attempt.
		logs := c.run("runs", "logs", runID, "--follow", "-o", "table")
		require.Equal(t, 1, logs.code, logs)
		for _, want := range []string{"start#1", "boom#1", "boom#2", "boom#3", "kaboom", "Run " + runID + " failed."} {
			require.Contains(t, logs.stdout, want)
		}
		require.Equal(t, 3, strings.Count(logs.stdout, " failed "), logs.stdout)

		got := obj(t, decodeAny(t, c.ok("runs", "get", runID).stdout))
		require.Equal(t, "failed", got["status"])
	})

	t.Run("RunFollowOfARetriedStepThatSucceeds", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-retry")
		id := c.workflow("retried", `{"blocks":[
			{"block_id":"start","type":"trigger.manual","params":{}},
			{"block_id":"flaky","type":"fail","params":{"message":"not yet","fail_attempts":2}},
			{"block_id":"done","type":"log","params":{"message":"n={{ input.n }}"}}
		],"edges":[{"block_id":"start","target_block_id":"flaky"},{"block_id":"flaky","target_block_id":"done"}]}`)

		res := c.run("run", id, "--input", `{"n":7}`, "--follow", "-o", "table")
		require.Equal(t, 0, res.code, res)
		for _, want := range []string{"flaky#1", "flaky#2", "flaky#3", "not yet", "done#1", "completed.", `"n=7"`} {
			require.Contains(t, res.stdout, want)
		}
	})

	t.Run("RunsSignalAndCancel", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-signal")
		id := c.workflow("gated", `{"blocks":[
			{"block_id":"start","type":"trigger.manual","params":{}},
			{"block_id":"gate","type":"wait","params":{"signal":"go"}},
			{"block_id":"done","type":"transform","params":{"value":"{{ steps.gate.output.signal.payload }}"}}
		],"edges":[{"block_id":"start","target_block_id":"gate"},{"block_id":"gate","target_block_id":"done"}]}`)

		started := obj(t, decodeAny(t, c.ok("run", id).stdout))
		runID := started["runId"].(string)
		require.Equal(t, "svc-runtime", started["spec"])
		c.waitRun(runID, func(r map[string]any) bool { return r["status"] == "waiting" })
		require.Contains(t, c.ok("runs", "get", runID, "-o", "table").stdout, "signal at gate")

		sig := obj(t, decodeAny(t, c.ok("runs", "signal", runID, "--name", "go", "--payload", `{"by":"cli"}`).stdout))
		require.Regexp(t, `^sig_`, sig["signalId"])
		done := c.ok("runs", "logs", runID, "--follow")
		final := jsonLines(t, done.stdout)
		require.Equal(t, "completed", final[len(final)-1]["status"])
		require.Equal(t, map[string]any{"done": map[string]any{"by": "cli"}}, final[len(final)-1]["output"])

		var runs []map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("runs", "list", "--workflow", id).stdout), &runs))
		require.Len(t, runs, 1)

		second := obj(t, decodeAny(t, c.ok("run", id).stdout))["runId"].(string)
		c.waitRun(second, func(r map[string]any) bool { return r["status"] == "waiting" })
		require.Contains(t, c.ok("runs", "cancel", second, "-o", "table").stdout, "cancelled")
		cancelled := c.run("runs", "logs", second, "--follow")
		require.Equal(t, 1, cancelled.code, cancelled)
		require.Contains(t, cancelled.stderr, "run "+second+" cancelled")
		finished := c.run("runs", "cancel", runID)
		require.Equal(t, 1, finished.code, finished)
		require.Contains(t, finished.stderr, "run_finished")
	})

	t.Run("Schedules", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		c.login("cli-sched")
		probe := c.run("schedules", "list")
		if probe.code != 0 && strings.Contains(probe.stderr, "not_found") {
			t.Skip("the scheduler's /api/schedules routes do not answer yet: " + probe.stderr)
		}
		require.Equal(t, 0, probe.code, probe)
		id := c.workflow("scheduled", `{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}}],"edges":[]}`)
		s := obj(t, decodeAny(t, c.ok("schedules", "create", "--workflow", id, "--cron", "@hourly", "--input", `{"a":1}`).stdout))
		sid := s["id"].(string)
		require.Regexp(t, `^sch_`, sid)
		require.Equal(t, "UTC", s["timezone"])
		require.Contains(t, c.ok("schedules", "list", "-o", "table").stdout, sid)
		bad := c.run("schedules", "create", "--workflow", id, "--cron", "every tuesday")
		require.Equal(t, 1, bad.code, bad)
		require.Contains(t, bad.stderr, "invalid_cron")
		c.ok("schedules", "delete", sid)
		require.Equal(t, "[]", strings.TrimSpace(c.ok("schedules", "list").stdout))
	})

	t.Run("InteractiveLoginHidesThePassword", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, api)
		email, password := uniqueEmail("cli-tty"), "tty-secret-Passw0rd"

		// First login: sign-up, so the password is asked twice.
		term := c.startPTY(t, "login")
		term.expect("Email: ")
		term.typeLine(email)
		term.expect("Password: ")
		term.typeSecret(password)
		term.expect("Confirm password: ")
		term.typeSecret(password)
		out := term.wait(0)
		require.Contains(t, out, email, "the email is echoed")
		require.Contains(t, out, "Signed up as "+email)
		require.NotContains(t, out, password, "the password must not be echoed")
		require.NotContains(t, out, password[:8])
		s := requireSession(t, readCredentials(t, c.credsPath), api)
		require.Equal(t, email, s["userEmail"])

		// Second login: sign-in, one password prompt; a flag given is not asked for.
		term = c.startPTY(t, "login", "--email", email)
		term.expect("Password: ")
		term.typeSecret(password)
		out = term.wait(0)
		require.Contains(t, out, "Signed in as "+email)
		require.NotContains(t, out, "Email: ")
		require.NotContains(t, out, password)

		// Ctrl-C at the hidden prompt ends the login (130) and leaves the terminal echoing again.
		term = c.startPTY(t, "login", "--email", email)
		term.expect("Password: ")
		term.waitEchoOff()
		_, err := term.ptmx.Write([]byte{3}) // ^C: the line discipline sends SIGINT
		require.NoError(t, err)
		out = term.wait(130)
		require.Contains(t, out, "interrupted")
		require.True(t, term.echoAfterExit, "svc left the terminal without echo")

		// Non-interactive on a terminal: a missing flag is a usage error, no prompt.
		term = c.startPTY(t, "login", "--non-interactive", "--email", email)
		out = term.wait(2)
		require.Contains(t, out, "--password is required")
		require.NotContains(t, out, "Password: ")
	})
}

// ---------------------------------------------------------------------------------------
// Driving the binary.

// buildCLI builds svc from this checkout into the test's temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	gowork, err := exec.Command("go", "env", "GOWORK").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gowork)))
	bin := filepath.Join(t.TempDir(), "svc")
	cmd := exec.Command("go", "build", "-o", bin, "svc.dev/tools/svc")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build svc: %s", out)
	return bin
}

// cliRunner runs svc with its own HOME and credentials file, against one API.
type cliRunner struct {
	t         *testing.T
	bin       string
	api       string
	home      string
	credsPath string // "" leaves SVC_CREDENTIALS unset: ~/.svc/credentials.json
	extra     []string
	drop      map[string]bool
}

func newCLI(t *testing.T, bin, api string) *cliRunner {
	t.Helper()
	home := t.TempDir()
	return &cliRunner{t: t, bin: bin, api: api, home: home, credsPath: filepath.Join(t.TempDir(), "creds", "credentials.json"), drop: map[string]bool{}}
}

// with returns a runner with extra environment entries.
func (c *cliRunner) with(kv ...string) *cliRunner {
	cp := *c
	cp.extra = append(append([]string{}, c.extra...), kv...)
	return &cp
}

// without returns a runner that does not set the named variable.
func (c *cliRunner) without(name string) *cliRunner {
	cp := *c
	cp.drop = map[string]bool{name: true}
	for k := range c.drop {
		cp.drop[k] = true
	}
	return &cp
}

func (c *cliRunner) environ() []string {
	env := append(environ(), "HOME="+c.home)
	if !c.drop["SVC_API"] {
		env = append(env, "SVC_API="+c.api)
	}
	if c.credsPath != "" {
		env = append(env, "SVC_CREDENTIALS="+c.credsPath)
	}
	return append(env, c.extra...)
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

func (c *cliRunner) runIn(stdin string, args ...string) cliResult {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.environ()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(c.t, err)
	}
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (c *cliRunner) run(args ...string) cliResult { c.t.Helper(); return c.runIn("", args...) }

func (c *cliRunner) okIn(stdin string, args ...string) cliResult {
	c.t.Helper()
	r := c.runIn(stdin, args...)
	require.Equal(c.t, 0, r.code, "svc %s\n%s", strings.Join(args, " "), r)
	return r
}

func (c *cliRunner) ok(args ...string) cliResult { c.t.Helper(); return c.okIn("", args...) }

// login signs up a fresh user through the CLI and returns its email.
func (c *cliRunner) login(prefix string) string {
	c.t.Helper()
	email := uniqueEmail(prefix)
	c.ok("login", "--email", email, "--password", "correct horse battery", "--non-interactive")
	return email
}

// workflow creates a workflow from a definition through the CLI and returns its id.
func (c *cliRunner) workflow(name, definition string) string {
	c.t.Helper()
	wf := obj(c.t, decodeAny(c.t, c.ok("workflows", "create", "--name", name, "-f", writeFile(c.t, definition)).stdout))
	require.Empty(c.t, wf["skipped_items"], wf)
	require.Empty(c.t, wf["validation_errors"], wf)
	return wf["id"].(string)
}

// waitRun polls `svc runs get` until done accepts the run (15 s at most).
func (c *cliRunner) waitRun(runID string, done func(map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := obj(c.t, decodeAny(c.t, c.ok("runs", "get", runID).stdout))
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("run %s: not there within 15 s; last: %v", runID, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "doc.json")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		out = append(out, obj(t, decodeAny(t, sc.Text())))
	}
	return out
}

func mapKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ---------------------------------------------------------------------------------------
// The credentials file.

func readCredentials(t *testing.T, path string) map[string]any {
	t.Helper()
	requireMode0600(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	f := obj(t, decodeAny(t, string(b)))
	require.ElementsMatch(t, []string{"default", "sessions"}, mapKeys(f), "the seed's shape: %s", b)
	// No temporary file is left beside it.
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), ".tmp"), "left over: %s", e.Name())
	}
	return f
}

func requireMode0600(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), path)
}

// requireSession checks one API's entry has exactly the documented fields, well formed.
func requireSession(t *testing.T, file map[string]any, api string) map[string]any {
	t.Helper()
	sessions := obj(t, file["sessions"])
	s := obj(t, sessions[api])
	require.ElementsMatch(t, []string{"userId", "userEmail", "organizationId", "organizationSlug", "apiKey", "apiKeyId", "sessionCookie", "createdAt"}, mapKeys(s))
	require.Regexp(t, `^usr_`, s["userId"])
	require.Regexp(t, `^org_`, s["organizationId"])
	require.Regexp(t, `^svc_[A-Za-z]{64}$`, s["apiKey"])
	require.Regexp(t, `^key_`, s["apiKeyId"])
	require.Regexp(t, `^svc\.session_token=.+`, s["sessionCookie"])
	stamp(t, s["createdAt"])
	return s
}

// ---------------------------------------------------------------------------------------
// A pseudo-terminal session.

type ptySession struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	read chan struct{}
	pos  int
	// echoAfterExit is the terminal's ECHO flag as the program left it.
	echoAfterExit bool
}

// startPTY runs svc with stdin, stdout and stderr on a new terminal.
func (c *cliRunner) startPTY(t *testing.T, args ...string) *ptySession {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.environ()
	return startOnTerminal(t, cmd)
}

// startOnTerminal runs cmd with stdin, stdout and stderr on a new terminal, in a session of
// its own whose foreground process group is cmd's (as a shell runs a command): a Ctrl-C typed
// there signals that group.
func startOnTerminal(t *testing.T, cmd *exec.Cmd) *ptySession {
	t.Helper()
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 200}))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	require.NoError(t, cmd.Start())
	p := &ptySession{t: t, cmd: cmd, ptmx: ptmx, tty: tty, read: make(chan struct{})}
	go func() {
		defer close(p.read)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = ptmx.Close()
		_ = tty.Close()
	})
	return p
}

func (p *ptySession) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// expect waits (10 s at most) until the output after the previous expectation shows s.
func (p *ptySession) expect(s string) {
	p.t.Helper()
	p.expectWithin(s, 10*time.Second)
}

// expectWithin waits (d at most) until the output after the previous expectation shows s.
func (p *ptySession) expectWithin(s string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := p.output()
		if i := strings.Index(out[p.pos:], s); i >= 0 {
			p.pos += i + len(s)
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("terminal: no %q within %s; output:\n%s", s, d, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *ptySession) typeLine(s string) {
	p.t.Helper()
	_, err := io.WriteString(p.ptmx, s+"\r")
	require.NoError(p.t, err)
}

// typeSecret waits until the program has turned echo off, then types s: typed before that,
// the terminal itself would echo it, whatever the program does.
func (p *ptySession) typeSecret(s string) {
	p.t.Helper()
	p.waitEchoOff()
	p.typeLine(s)
}

func (p *ptySession) echo() bool {
	p.t.Helper()
	tio, err := unix.IoctlGetTermios(int(p.tty.Fd()), unix.TCGETS)
	require.NoError(p.t, err)
	return tio.Lflag&unix.ECHO != 0
}

// waitEchoOff waits (10 s at most) until the program has turned the terminal's echo off.
func (p *ptySession) waitEchoOff() {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.echo() {
		if time.Now().After(deadline) {
			p.t.Fatalf("terminal: echo still on 10 s after the password prompt; output:\n%s", p.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the program to exit with code and returns everything it printed.
func (p *ptySession) wait(code int) string {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		got := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			got = exit.ExitCode()
		} else {
			require.NoError(p.t, err)
		}
		p.echoAfterExit = p.echo()
		// The child is gone: closing our end of the terminal ends the reader once drained.
		_ = p.tty.Close()
		select {
		case <-p.read:
		case <-time.After(5 * time.Second):
		}
		out := p.output()
		require.Equal(p.t, code, got, "exit code; output:\n%s", out)
		return out
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		p.t.Fatalf("terminal: svc did not exit within 30 s; output:\n%s", p.output())
		return ""
	}
}
