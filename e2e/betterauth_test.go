package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"svc.dev/e2e/harness"
)

// betterAuthDir is the Node project that drives the auth layer with the real better-auth
// client (package.json pins better-auth and @better-auth/api-key; client-test.mjs is the script).
const betterAuthDir = "betterauth"

// clientOrigin is the Origin the client sends; the system trusts it through SVC_TRUSTED_ORIGINS
// (the public base URL is only known once the harness has picked the ports).
const clientOrigin = "http://client.test"

// npmInstall runs `npm ci` at most once per test process: .ci/run installs the packages up front,
// but `make test` on a fresh clone (or after package-lock.json changed) must work too.
var npmInstall struct {
	once sync.Once
	err  error
	out  []byte
}

// TestBetterAuthClient drives /api/auth/* with better-auth's own client from npm, configured as
// a Node program uses it (bearer token, Origin header, organization and api-key plugins):
// sign-up, get-session, organization create / set-active / list, api-key create / list / delete
// (and the fresh key through the gateway's guard), sign-out, sign-in. The client's
// expectations are the contract: any drift in paths, methods, bodies or shapes fails here.
func TestBetterAuthClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		skipUnlessRequired(t, "node is not on PATH: install Node.js (20+) and npm to run the better-auth client test")
	}
	ensureNodeModules(t)

	sys := harness.Start(t, harness.Options{Env: map[string]string{"SVC_TRUSTED_ORIGINS": clientOrigin}})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client-test.mjs")
	cmd.Dir = betterAuthDir
	cmd.Env = append(environ(), "BASE_URL="+sys.BaseURL, "ORIGIN="+clientOrigin)
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Log(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err = cmd.Run()
	_ = pw.Close()
	<-logged
	if ctx.Err() != nil {
		t.Fatalf("better-auth client: no result within 2 minutes (%v)", err)
	}
	if err != nil {
		t.Fatalf("better-auth client failed (%v): see its output above and the services' below", err)
	}
}

// ensureNodeModules installs e2e/betterauth's packages with `npm ci` when node_modules is
// missing or older than package-lock.json.
func ensureNodeModules(t *testing.T) {
	t.Helper()
	if nodeModulesCurrent(t) {
		return
	}
	npmInstall.once.Do(func() {
		npm, err := exec.LookPath("npm")
		if err != nil {
			npmInstall.err = errors.New("npm is not on PATH")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = betterAuthDir
		npmInstall.out, npmInstall.err = cmd.CombinedOutput()
	})
	if npmInstall.err != nil {
		t.Fatalf("e2e/betterauth/node_modules is missing or stale and `npm ci` failed (%v); run `npm ci --no-audit --no-fund` in e2e/betterauth:\n%s",
			npmInstall.err, npmInstall.out)
	}
	if !nodeModulesCurrent(t) {
		t.Fatalf("e2e/betterauth/node_modules is still missing or older than package-lock.json after `npm ci`; run `npm ci --no-audit --no-fund` in e2e/betterauth")
	}
}

// nodeModulesCurrent reports whether node_modules was installed from the current lock file:
// npm writes node_modules/.package-lock.json on every install.
func nodeModulesCurrent(t *testing.T) bool {
	t.Helper()
	lock, err := os.Stat(filepath.Join(betterAuthDir, "package-lock.json"))
	if err != nil {
		t.Fatalf("e2e/betterauth/package-lock.json: %v", err)
	}
	installed, err := os.Stat(filepath.Join(betterAuthDir, "node_modules", ".package-lock.json"))
	if err != nil {
		return false
	}
	return !installed.ModTime().Before(lock.ModTime())
}
