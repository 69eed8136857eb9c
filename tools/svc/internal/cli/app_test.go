package cli_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/clients/apiclient"
	"svc.dev/tools/svc/internal/cli"
	"svc.dev/tools/svc/internal/credential"
)

// noNetwork fails any request: the command lines tested here must be settled before one.
type noNetwork struct{ calls atomic.Int64 }

func (n *noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	n.calls.Add(1)
	return nil, errors.New("no request expected: " + r.Method + " " + r.URL.String())
}

type testBundle struct {
	creds string
	env   map[string]string
	net   *noNetwork
	stdin string
}

type result struct {
	code           int
	stdout, stderr string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{
		creds: filepath.Join(t.TempDir(), "credentials.json"),
		env:   map[string]string{},
		net:   &noNetwork{},
	}
}

func (b *testBundle) run(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"SVC_CREDENTIALS": b.creds}
	for k, v := range b.env {
		env[k] = v
	}
	code := cli.Run(context.Background(), cli.Env{
		Stdin:      strings.NewReader(b.stdin),
		Stdout:     &stdout,
		Stderr:     &stderr,
		Getenv:     func(k string) string { return env[k] },
		HomeDir:    func() (string, error) { return "", errors.New("no home in tests") },
		Hostname:   func() (string, error) { return "test-host", nil },
		Now:        func() time.Time { return time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC) },
		Sleep:      apiclient.Sleep,
		HTTPClient: &http.Client{Transport: b.net},
		Version:    "v1.2.3-test",
	}, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (b *testBundle) login(t *testing.T, api string, n int) credential.Session {
	t.Helper()
	s := credential.Session{
		UserID: "usr_" + string(rune('a'+n)), UserEmail: "user" + string(rune('a'+n)) + "@example.com", OrganizationID: "org_x",
		OrganizationSlug: "personal-abcdefg" + string(rune('a'+n)), APIKey: "svc_KEY'" + string(rune('a'+n)), APIKeyID: "key_1",
		SessionCookie: "svc.session_token=x", CreatedAt: "2026-11-22T06:00:00.000Z",
	}
	require.NoError(t, credential.NewStore(b.creds).Put(api, s))
	return s
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	opsFile := filepath.Join(t.TempDir(), "ops.json")
	require.NoError(t, os.WriteFile(opsFile, []byte(`[{"operation_type":"remove","block_id":"x"}]`), 0o600))
	notOps := filepath.Join(t.TempDir(), "not-ops.json")
	require.NoError(t, os.WriteFile(notOps, []byte(`{"operations":[]}`), 0o600))
	badJSON := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(badJSON, []byte(`[{"operation_type":`), 0o600))

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"UnknownCommand", []string{"nope"}, `unknown command "nope" for "svc"`},
		{"Suggestion", []string{"wrokflows"}, "did you mean workflows?"},
		{"UnknownFlag", []string{"workflows", "list", "--bogus"}, "unknown flag: --bogus"},
		{"GroupWithoutCommand", []string{"key"}, "svc key needs a command: create, list, revoke"},
		{"GroupUnknownCommand", []string{"runs", "frobnicate"}, `unknown command "frobnicate" for "svc runs"`},
		{"MissingArgument", []string{"runs", "get"}, "missing argument <run-id>"},
		{"ExtraArgument", []string{"runs", "get", "run_1", "run_2"}, `unexpected argument "run_2"`},
		{"EmptyArgument", []string{"key", "revoke", " "}, "argument <key-id> is empty"},
		{"ArgumentsToALeaf", []string{"whoami", "me"}, `unexpected argument "me"`},
		{"BadShell", []string{"env", "--shell", "zsh"}, `invalid --shell "zsh": want sh, fish or powershell`},
		{"LoginNonInteractiveNeedsEmail", []string{"login", "--non-interactive", "--password", "x"}, "--email is required"},
		{"LoginWithoutTerminalNeedsPassword", []string{"login", "--email", "a@b.c"}, "--password is required"},
		{"KeyCreateNeedsName", []string{"key", "create"}, "--name is required"},
		{"WorkflowsCreateNeedsName", []string{"workflows", "create"}, "--name is required"},
		{"WorkflowsCreateBadFile", []string{"workflows", "create", "--name", "x", "-f", badJSON}, "not valid JSON"},
		{"OpsNeedFile", []string{"ops", "apply", "wf_1"}, "-f is required"},
		{"OpsIfMatchPositive", []string{"ops", "apply", "wf_1", "-f", opsFile, "--if-match", "0"}, "--if-match must be a positive integer"},
		{"OpsIfMatchInteger", []string{"ops", "apply", "wf_1", "-f", opsFile, "--if-match", "three"}, `invalid argument "three" for "--if-match"`},
		{"OpsFileNotJSON", []string{"ops", "apply", "wf_1", "-f", badJSON}, "not valid JSON"},
		{"OpsFileNotOps", []string{"ops", "apply", "wf_1", "-f", notOps}, `want an array of operations or {"ops": [...]}`},
		{"OpsFileMissing", []string{"ops", "apply", "wf_1", "-f", "/nonexistent/ops.json"}, "no such file"},
		{"RunInputNotJSON", []string{"run", "wf_1", "--input", "{n: 1}"}, "--input: not valid JSON"},
		{"SignalNeedsName", []string{"runs", "signal", "run_1"}, "--name is required"},
		{"SignalPayloadNotJSON", []string{"runs", "signal", "run_1", "--name", "go", "--payload", "yes"}, "--payload: not valid JSON"},
		{"ScheduleNeedsWorkflow", []string{"schedules", "create", "--cron", "@hourly"}, "--workflow is required"},
		{"ScheduleNeedsCron", []string{"schedules", "create", "--workflow", "wf_1"}, "--cron is required"},
		{"CompletionShell", []string{"completion", "tcsh"}, `unknown shell "tcsh"`},
		{"BadAPI", []string{"--api", "ftp://example.com", "workflows", "list"}, `invalid --api: API URL "ftp://example.com" is not an absolute http(s) URL`},
		{"BadOutput", []string{"-o", "yaml", "whoami"}, `invalid --output "yaml"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.login(t, "http://localhost:8080", 0)
			r := b.run(t, tt.args...)
			require.Equal(t, cli.ExitUsage, r.code, "%+v", r)
			require.Contains(t, r.stderr, tt.want)
			require.Contains(t, r.stderr, "--help' for usage.")
			require.Empty(t, r.stdout)
			require.Zero(t, b.net.calls.Load(), "no request for a usage error")
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		r := setup(t).run(t, args...)
		require.Equal(t, result{code: 0, stdout: "svc v1.2.3-test\n"}, r)
	}
	for _, args := range [][]string{{}, {"--help"}, {"-h"}, {"help"}} {
		r := setup(t).run(t, args...)
		require.Equal(t, 0, r.code, r)
		for _, want := range []string{"login", "logout", "token", "env", "whoami", "key", "workflows", "ops", "run", "runs", "schedules", "completion", "--api", "--version"} {
			require.Contains(t, r.stdout, want)
		}
	}
	r := setup(t).run(t, "ops", "apply", "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "--if-match")
	require.Contains(t, r.stdout, "svc ops apply wf_123 -f ops.json --if-match 3")
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "bash completion V2 for svc", "zsh": "#compdef svc", "fish": "fish completion for svc"} {
		r := setup(t).run(t, "completion", shell)
		require.Equal(t, 0, r.code, r)
		require.Contains(t, r.stdout, want)
	}
}

func TestAPIResolution(t *testing.T) {
	t.Parallel()

	type testCase struct {
		name     string
		flag     string
		env      string
		logins   []string // in order: the last is the credentials default
		wantAPI  string
		wantCode int
	}
	for _, tt := range []testCase{
		{name: "FlagWins", flag: "http://flag:1", env: "http://env:2", logins: []string{"http://flag:1", "http://env:2", "http://default:3"}, wantAPI: "http://flag:1"},
		{name: "ThenSVC_API", env: "http://env:2", logins: []string{"http://env:2", "http://default:3"}, wantAPI: "http://env:2"},
		{name: "ThenTheLastLogin", logins: []string{"http://env:2", "http://default:3"}, wantAPI: "http://default:3"},
		{name: "ThenLocalhost", logins: nil, wantAPI: "http://localhost:8080", wantCode: 1},
		{name: "Normalized", flag: "http://flag:1/", logins: []string{"http://flag:1"}, wantAPI: "http://flag:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for i, api := range tt.logins {
				b.login(t, api, i)
			}
			if tt.env != "" {
				b.env["SVC_API"] = tt.env
			}
			args := []string{"whoami", "-o", "json"}
			if tt.flag != "" {
				args = append(args, "--api", tt.flag)
			}
			r := b.run(t, args...)
			require.Equal(t, tt.wantCode, r.code, r)
			if tt.wantCode != 0 {
				require.Contains(t, r.stderr, "not logged in to "+tt.wantAPI)
				return
			}
			require.Contains(t, r.stdout, `"api": "`+tt.wantAPI+`"`)
		})
	}
}

func TestTokenEnvWhoamiLogout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.login(t, "http://a:1", 0)
	other := b.login(t, "http://b:2", 1)
	b.env["SVC_API"] = "http://a:1"

	require.Equal(t, result{stdout: a.APIKey + "\n"}, b.run(t, "token"))

	// The key holds a quote: each shell's quoting must carry it through. sh is checked for real.
	sh := b.run(t, "env")
	require.Equal(t, "export SVC_API_KEY='svc_KEY'\\''a'\nexport SVC_API='http://a:1'\n", sh.stdout)
	got, err := exec.Command("sh", "-c", sh.stdout+`printf '%s|%s' "$SVC_API_KEY" "$SVC_API"`).Output()
	require.NoError(t, err)
	require.Equal(t, a.APIKey+"|http://a:1", string(got))
	require.Equal(t, "set -gx SVC_API_KEY 'svc_KEY\\'a';\nset -gx SVC_API 'http://a:1';\n", b.run(t, "env", "--shell", "fish").stdout)
	require.Equal(t, "$env:SVC_API_KEY = 'svc_KEY''a'\n$env:SVC_API = 'http://a:1'\n", b.run(t, "env", "--shell", "powershell").stdout)

	r := b.run(t, "whoami", "-o", "table")
	require.Equal(t, 0, r.code, r)
	require.Regexp(t, `EMAIL\s+ORGANIZATION\s+API\n`+a.UserEmail+`\s+`+a.OrganizationSlug+`\s+http://a:1\n`, r.stdout)

	r = b.run(t, "logout")
	require.Equal(t, 0, r.code, r)
	require.Equal(t, "{\n  \"api\": \"http://a:1\",\n  \"removed\": true\n}\n", r.stdout)
	f, err := credential.NewStore(b.creds).Load()
	require.NoError(t, err)
	require.Equal(t, map[string]credential.Session{"http://b:2": other}, f.Sessions)

	r = b.run(t, "token")
	require.Equal(t, 1, r.code)
	require.Equal(t, "svc: not logged in to http://a:1: run 'svc login --api http://a:1'\n", r.stderr)
	require.Zero(t, b.net.calls.Load())
}

func TestUnreachableAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.login(t, "http://a:1", 0)
	r := b.run(t, "--api", "http://a:1", "workflows", "list")
	require.Equal(t, 1, r.code, r)
	require.Contains(t, r.stderr, "svc: cannot reach the API (GET http://a:1/api/workflows?limit=500)")
	require.EqualValues(t, 1, b.net.calls.Load())
}
