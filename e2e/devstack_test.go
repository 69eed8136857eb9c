package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
	"svc.dev/libs/testkit"
)

// TestMakeRun (issue 22): `make run` as a person runs it, on a terminal of its own, stopped by
// typing Ctrl-C there (the terminal signals its whole foreground process group: make, the
// shell of the recipe, devstack, and a build if one runs).
//
//   - Ctrl-C stops every process devstack started (none of the terminal's session is left,
//     every port is closed), devstack says so, and exits 0: make prints no error.
//   - A restart on the same state folder keeps the secret devstack generated, so the login
//     the svc CLI saved before it still works after it, and `svc logout --revoke` (which needs
//     the saved session) succeeds.
//
// The subtests run one after the other: each `make run` builds .devstack/devstack in the
// repository.
func TestMakeRun(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("make")
	require.NoError(t, err, "make run needs make on PATH")
	repo, err := filepath.Abs("..")
	require.NoError(t, err)

	t.Run("CtrlCStopsEverything", func(t *testing.T) {
		st := newDevstack(t, repo)
		term := st.makeRun(t)
		require.Contains(t, term.output(), "SVC_INTERNAL_SECRET: generated a random one, kept in "+st.secretFile())
		st.ctrlC(t, term)

		// The binary the recipe built and ran, on its own: its exit status is 0 too.
		term = st.start(t, exec.Command(filepath.Join(repo, ".devstack", "devstack"), st.flags()...))
		st.ctrlC(t, term)
	})

	t.Run("RestartKeepsTheLogin", func(t *testing.T) {
		st := newDevstack(t, repo)
		term := st.makeRun(t)
		c := newCLI(t, buildCLI(t), st.baseURL)
		c.ok("login", "--email", uniqueEmail("devstack"), "--password", "correct horse battery", "--non-interactive")
		key := requireSession(t, readCredentials(t, c.credsPath), st.baseURL)["apiKey"].(string)
		st.ctrlC(t, term)

		info, err := os.Stat(st.secretFile())
		require.NoError(t, err, "the generated secret is kept in the state folder")
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

		term = st.makeRun(t)
		require.Contains(t, term.output(), "SVC_INTERNAL_SECRET: the one kept in "+st.secretFile())
		who := obj(t, decodeAny(t, c.ok("whoami").stdout))
		require.NotEmpty(t, who, "the saved login works after the restart")
		c.ok("workflows", "list")
		out := obj(t, decodeAny(t, c.ok("logout", "--revoke").stdout))
		require.Equal(t, true, out["removed"], out)
		require.Regexp(t, `^key_`, out["revokedApiKeyId"], "the saved session revoked the key: %v", out)
		gone := call(t, "GET", st.baseURL+"/api/workflows", nil, "Authorization", "Bearer "+key)
		require.Equal(t, 401, gone.Status, "the revoked key is refused: %s", gone.Raw)
		st.ctrlC(t, term)
	})
}

// devstackRun is one state folder for `make run` (-root: its .devstack holds the service
// binaries, linked to the ones the harness built, and the kept secret), and the settings that
// place the system on free ports, on a database and a Redis prefix of the test's own.
type devstackRun struct {
	repo    string
	root    string
	env     []string
	addrs   []string // every listen address
	baseURL string   // what the last start printed
}

func newDevstack(t *testing.T, repo string) *devstackRun {
	t.Helper()
	root := t.TempDir()
	bin := filepath.Join(root, ".devstack", "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, s := range []harness.Service{harness.Identity, harness.Editor, harness.Orchestrator, harness.Scheduler, harness.Webhook, harness.Gateway} {
		require.NoError(t, os.Symlink(harness.Binary(t, s), filepath.Join(bin, string(s))))
	}
	_, keys := testkit.NewRedis(t)
	st := &devstackRun{repo: repo, root: root, env: append(environ(),
		"SVC_DATABASE_URL="+testkit.NewDatabase(t),
		"SVC_REDIS_URL="+testkit.RedisURL(t),
		"SVC_REDIS_PREFIX="+keys.Prefix(),
	)}
	for _, name := range []string{"SVC_PUBLIC_ADDR", "SVC_GATEWAY_ADMIN_ADDR", "SVC_IDENTITY_ADDR", "SVC_EDITOR_ADDR",
		"SVC_ORCHESTRATOR_ADDR", "SVC_SCHEDULER_ADDR", "SVC_WEBHOOK_ADDR"} {
		addr := harness.FreeAddr(t)
		st.addrs = append(st.addrs, addr)
		st.env = append(st.env, name+"="+addr)
	}
	return st
}

func (st *devstackRun) flags() []string {
	return []string{"-no-build", "-root", st.root, "-health-timeout", "2m"}
}

func (st *devstackRun) secretFile() string {
	return filepath.Join(st.root, ".devstack", "internal-secret")
}

// makeRun runs `make run` from the repository root on a terminal and waits until the system
// is up.
func (st *devstackRun) makeRun(t *testing.T) *ptySession {
	t.Helper()
	return st.start(t, exec.Command("make", "run", "DEVSTACK_FLAGS="+strings.Join(st.flags(), " ")))
}

// start runs cmd on a terminal of its own and waits (3 minutes at most: make run may build
// devstack first) until the system is up. If the test ends first, the terminal gets a Ctrl-C
// and whatever of its session is left is killed.
func (st *devstackRun) start(t *testing.T, cmd *exec.Cmd) *ptySession {
	t.Helper()
	cmd.Dir, cmd.Env = st.repo, st.env
	term := startOnTerminal(t, cmd)
	sid := cmd.Process.Pid
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_, _ = term.ptmx.Write([]byte{0x03})
			deadline := time.Now().Add(30 * time.Second)
			for len(sessionProcesses(sid)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, p := range sessionProcesses(sid) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})
	term.expectWithin("svc is up: ", 3*time.Minute)
	m := regexp.MustCompile(`svc is up: (\S+)`).FindStringSubmatch(term.output())
	require.NotNil(t, m)
	st.baseURL = strings.TrimSpace(m[1])
	return term
}

// ctrlC types Ctrl-C on the terminal and checks what follows: devstack says it stopped, no
// process of the terminal's session is left, every address is closed, and the command exits
// 0. devstack takes the terminal's foreground, so the interrupt reaches it and not make, which
// then ends with devstack's status (an interrupted GNU make would end by the signal).
func (st *devstackRun) ctrlC(t *testing.T, term *ptySession) {
	t.Helper()
	_, err := term.ptmx.Write([]byte{0x03})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- term.cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after Ctrl-C; output:\n%s", term.output())
	}
	require.NoError(t, err, "exit status after Ctrl-C; output:\n%s", term.output())
	term.expect("devstack stopped: every process it started has exited")
	out := term.output()
	require.NotContains(t, out, "make: ***", "make reports no failure")
	require.NotContains(t, out, "devstack stopped err=", "devstack reports no failure")

	sid := term.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for left := sessionProcesses(sid); len(left) > 0; left = sessionProcesses(sid) {
		if time.Now().After(deadline) {
			t.Fatalf("still running after Ctrl-C: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, addr := range st.addrs {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		require.Error(t, err, "%s is still served after Ctrl-C", addr)
	}
}

// sessionProc is a live process of a session.
type sessionProc struct {
	pid     int
	cmdline string
}

// sessionProcesses lists the processes of session sid that have not exited (a zombie has
// exited: it holds no port and waits only to be reaped).
func sessionProcesses(sid int) []sessionProc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []sessionProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 4 || f[0] == "Z" || f[3] != strconv.Itoa(sid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, sessionProc{pid: pid, cmdline: strings.ReplaceAll(string(cmdline), "\x00", " ")})
	}
	return out
}
