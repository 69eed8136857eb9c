package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// consoleDir holds package.json and package-lock.json pinning playwright-core and axe-core, the
// script (console.mjs) that drives the web console with them, and axe.mjs, its accessibility
// check.
const consoleDir = "console"

// TestConsole drives the web console the gateway serves at / in a real browser (Debian's
// chromium, headless, through playwright-core). First, with no session: the API reference at
// /docs, drawn from /api/openapi.json, whose filter narrows it to the run-start operation (its
// Idempotency-Key header and its 202 shown), and /ui redirected to the console. Then: sign up, a workflow created through the API
// and opened (its graph), a run started from the page whose attempts appear without a reload
// (the run's event stream), the signal it waits for sent from the page, the run completed; a
// second run cancelled from the page; an API key created and revoked; the user's bucket emptied
// from outside the page, so that the page shows the 429's message and reads again once its
// retryAfterMs has passed. It takes screenshots of
// the workflow graph and the run page (docs/ holds the last ones kept, see below).
//
// A third user belongs to two organizations (seedConsoleTeam) and signs in with neither open:
// the console asks which; the empty one shows empty states that say what to do next, and
// switching to the other changes the lists. There: the workflows search, a workflow's
// validation errors on its blocks and its JSON, the runs list's status and workflow filters,
// a schedule's next fire time, disabled and enabled again from the page, and a signal sent
// from the page to a run cancelled meanwhile, refused with the contract's message.
//
// Readable everywhere (issue 22): a refused sign-in and sign-up are said in words (the code
// only in a title); an address with no page, loaded by the browser, is the console's not-found
// page (404, HTML) with a way back, signed in or not, and so is a run that does not exist;
// every table has column headers; the run's header names its workflow; a signal payload that
// is not JSON is said in words with where it stops; the timeline's bars stay in their track;
// the favicon is served; at 360 px nothing is wider than the window. Schedules are created
// (from /schedules?new=<workflowId>, their next fire times shown while the cron is typed,
// one preview per pause), edited and deleted from the page. axe-core checks every page visited
// (axe.mjs): no serious or critical violation.
//
// Then, at the default rate limit (60 requests a minute per principal), a second user signs in
// to an organization that already holds consoleSeedRuns runs (seedConsoleOrganization): the
// runs page shows the first page and loads the next, a run started meanwhile appears at the
// top of the list and its status follows, and its page shows its attempts as they happen and
// its end. The browser must get no 429, and the requests that page sends are counted and
// bounded (console.mjs). A page error fails the test.
func TestConsole(t *testing.T) {
	t.Parallel()
	browser, modules := consoleBrowser(t)
	// testOrigin is trusted too, for signUp (the seeded organization's user); the rate limit is
	// left at its default.
	sys := harness.Start(t, harness.Options{TrustGateway: true, Env: map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin}})
	seed := seedConsoleOrganization(t, sys, consoleSeedRuns)
	team := seedConsoleTeam(t, sys)
	teamJSON, err := json.Marshal(team)
	require.NoError(t, err)

	shots := consoleShots(t)
	out := runConsoleScript(t, "console.mjs", modules, "BASE_URL="+sys.BaseURL, "CHROMIUM="+browser,
		"SHOTS="+shots, "EMAIL=console-"+hex.EncodeToString([]byte(t.Name()))[:8]+"@example.com",
		"SEED_EMAIL="+seed.email, "SEED_PASSWORD="+seed.password, "SEED_KEY="+seed.key,
		"SEED_WORKFLOW="+seed.liveWorkflow, fmt.Sprintf("SEED_RUNS=%d", seed.runs), "TEAM="+string(teamJSON))
	// The requests the pages sent, for the record (console.mjs bounds them).
	for _, m := range regexp.MustCompile(`(?m)^(requests: |shown: |attempts on the run page: |a11y: |  (GET|POST|PATCH|DELETE) ).*$`).FindAllString(out, -1) {
		t.Log(m)
	}

	// The key revoked on the page is refused at once.
	m := regexp.MustCompile(`revoked: (svc_\w+)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	req, err := http.NewRequest(http.MethodGet, sys.BaseURL+"/api/workflows", nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", m[1])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	// Old or guessed addresses of a web UI are sent to the console; the reference is its page.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/ui", "/ui/runs"} {
		resp, err := noFollow.Get(sys.BaseURL + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusMovedPermanently, resp.StatusCode, p)
		require.Equal(t, "/", resp.Header.Get("Location"), p)
	}
	resp, err = http.Get(sys.BaseURL + "/docs")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("RateLimit-Remaining"), "/docs takes no rate-limit token")

	for _, f := range []string{"console-graph.png", "console-run.png"} {
		st, err := os.Stat(filepath.Join(shots, f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}

// consoleSeedRuns is how many runs the second organization holds before its user signs in:
// six pages of the runs list.
const consoleSeedRuns = 300

// consoleSeed is an organization whose user has not used the console yet.
type consoleSeed struct {
	email, password string
	key             string // an API key of the organization: a principal other than the user
	liveWorkflow    string // sleeps a few times, then waits for the signal "go"
	runs            int
}

// consoleLiveWorkflow runs for about eight seconds (eight sleeps of one second, each followed
// by a log line), then waits for the signal "go", then logs once more.
func consoleLiveWorkflow() map[string]any {
	blocks := []map[string]any{{"block_id": "start", "type": "trigger.manual"}}
	edges := []map[string]any{}
	prev := "start"
	for i := 1; i <= 8; i++ {
		nap, note := fmt.Sprintf("nap%d", i), fmt.Sprintf("note%d", i)
		blocks = append(blocks,
			map[string]any{"block_id": nap, "type": "wait", "params": map[string]any{"duration": "1s"}},
			map[string]any{"block_id": note, "type": "log", "params": map[string]any{"message": fmt.Sprintf("nap %d over", i)}})
		edges = append(edges, map[string]any{"block_id": prev, "target_block_id": nap}, map[string]any{"block_id": nap, "target_block_id": note})
		prev = note
	}
	blocks = append(blocks,
		map[string]any{"block_id": "hold", "type": "wait", "params": map[string]any{"signal": "go", "timeout": "10m"}},
		map[string]any{"block_id": "done", "type": "log", "params": map[string]any{"message": "live done"}})
	edges = append(edges, map[string]any{"block_id": prev, "target_block_id": "hold"}, map[string]any{"block_id": "hold", "target_block_id": "done"})
	return map[string]any{"blocks": blocks, "edges": edges}
}

// seedConsoleOrganization signs up a user and fills its organization with runs runs of a
// one-step workflow (they end as they are dispatched). The runs are started with API keys of
// the organization, 50 per key: each key is a principal with a bucket of its own, so neither
// the seeding nor the user's browser waits for the other's tokens.
func seedConsoleOrganization(t *testing.T, sys *harness.System, runs int) consoleSeed {
	t.Helper()
	a := signUp(t, sys, "console-big")
	const perKey = 50
	keys := make([]string, 1+(runs+perKey-1)/perKey)
	for i := range keys {
		r := a.c.post("/api/auth/api-key/create", map[string]any{"name": fmt.Sprintf("seed-%d", i)})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		keys[i], _ = r.Body["key"].(string)
		require.NotEmpty(t, keys[i], r.Raw)
	}
	admin := newClient(t, sys).with(func(c *client) { c.apiKey = keys[0] })
	create := func(name string, def map[string]any) string {
		r := admin.post("/api/workflows", map[string]any{"name": name, "definition": def})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		require.Empty(t, r.Body["skipped_items"], r.Raw)
		id, _ := r.Body["id"].(string)
		require.NotEmpty(t, id, r.Raw)
		return id
	}
	bulk := create("console-bulk", map[string]any{
		"blocks": []map[string]any{{"block_id": "start", "type": "trigger.manual"}, {"block_id": "note", "type": "log", "params": map[string]any{"message": "run {{ input.i }}"}}},
		"edges":  []map[string]any{{"block_id": "start", "target_block_id": "note"}},
	})
	live := create("console-live", consoleLiveWorkflow())

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	ctx := harness.Context(t)
	for k, key := range keys[1:] {
		wg.Go(func() {
			for j := range perKey {
				i := k*perKey + j
				if i >= runs {
					return
				}
				if err := startRunWithKey(ctx, sys.BaseURL, key, bulk, map[string]any{"i": i}); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	return consoleSeed{email: a.email, password: a.password, key: keys[0], liveWorkflow: live, runs: runs}
}

// consoleTeam is a user of two organizations: Org holds the data below, EmptyOrg nothing. The
// JSON goes to console.mjs as TEAM.
type consoleTeam struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Key      string `json:"key"` // an API key of Org: a principal other than the user
	Org      string `json:"org"`
	EmptyOrg string `json:"emptyOrg"`
	// Workflows by name: ops-alpha (logs once), ops-beta (waits for the signal "go"),
	// ops-broken (validation errors on its blocks "orphan" and "greet").
	Workflows map[string]string `json:"workflows"`
	AlphaRuns []string          `json:"alphaRuns"` // two runs of ops-alpha, completed
	BetaRun   string            `json:"betaRun"`   // a run of ops-beta, waiting for "go"
	Schedule  string            `json:"schedule"`  // a schedule of ops-alpha, enabled
}

// seedConsoleTeam signs up a user, whose personal organization stays empty, and creates a
// second organization for it that holds three workflows, three runs and a schedule, made with
// an API key of that organization.
func seedConsoleTeam(t *testing.T, sys *harness.System) consoleTeam {
	t.Helper()
	a := signUp(t, sys, "console-team")
	orgs := arr(t, decodeAny(t, a.c.get("/api/auth/organization/list").Raw))
	require.Len(t, orgs, 1)
	team := consoleTeam{Email: a.email, Password: a.password, EmptyOrg: obj(t, orgs[0])["name"].(string), Org: "Console Ops"}
	slug := "console-ops-" + strings.ToLower(a.userID[len(a.userID)-8:]) // the id's random tail
	r := a.c.post("/api/auth/organization/create", map[string]any{"name": team.Org, "slug": slug})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	// The new organization is this session's active one: the key belongs to it.
	r = a.c.post("/api/auth/api-key/create", map[string]any{"name": "team-seed"})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	team.Key, _ = r.Body["key"].(string)
	require.NotEmpty(t, team.Key, r.Raw)
	ops := newClient(t, sys).with(func(c *client) { c.apiKey = team.Key })

	start := map[string]any{"block_id": "start", "type": "trigger.manual"}
	defs := map[string]map[string]any{
		"ops-alpha": {
			"blocks": []map[string]any{start, {"block_id": "note", "type": "log", "params": map[string]any{"message": "alpha"}}},
			"edges":  []map[string]any{{"block_id": "start", "target_block_id": "note"}},
		},
		"ops-beta": {
			"blocks": []map[string]any{start, {"block_id": "hold", "type": "wait", "params": map[string]any{"signal": "go", "timeout": "10m"}}},
			"edges":  []map[string]any{{"block_id": "start", "target_block_id": "hold"}},
		},
		// orphan: no edge leads into it (unreachable_block); greet reads a block that does not
		// exist (unknown_reference).
		"ops-broken": {
			"blocks": []map[string]any{
				start,
				{"block_id": "greet", "type": "log", "params": map[string]any{"message": "{{ steps.ghost.output }}"}},
				{"block_id": "orphan", "type": "log", "params": map[string]any{"message": "never reached"}},
			},
			"edges": []map[string]any{{"block_id": "start", "target_block_id": "greet"}},
		},
	}
	team.Workflows = map[string]string{}
	for _, name := range []string{"ops-alpha", "ops-beta", "ops-broken"} {
		r := ops.post("/api/workflows", map[string]any{"name": name, "definition": defs[name]})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		require.Empty(t, r.Body["skipped_items"], r.Raw)
		team.Workflows[name], _ = r.Body["id"].(string)
	}
	broken := ops.get("/api/workflows/" + team.Workflows["ops-broken"])
	require.Contains(t, broken.Raw, `"unreachable_block"`)
	require.Contains(t, broken.Raw, `"unknown_reference"`)

	run := func(workflow string) string {
		r := ops.post("/api/workflows/"+team.Workflows[workflow]+"/run", map[string]any{"input": map[string]any{}})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		id, _ := r.Body["runId"].(string)
		require.NotEmpty(t, id, r.Raw)
		return id
	}
	team.AlphaRuns = []string{run("ops-alpha"), run("ops-alpha")}
	team.BetaRun = run("ops-beta")

	// January the first: it does not fire while the test runs.
	r = ops.post("/api/schedules", map[string]any{"workflowId": team.Workflows["ops-alpha"], "cron": "0 0 1 1 *"})
	require.Equal(t, http.StatusCreated, r.Status, r.Raw)
	team.Schedule, _ = r.Body["id"].(string)
	require.NotEmpty(t, team.Schedule, r.Raw)
	return team
}

// startRunWithKey starts a run of workflow with key; it runs on a goroutine of its own, so it
// returns its failure instead of failing the test.
func startRunWithKey(ctx context.Context, base, key, workflow string, input any) error {
	body, err := json.Marshal(map[string]any{"input": input})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/workflows/"+workflow+"/run", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("start run: %d %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return nil
}

// consoleBrowser is what the console's browser tests drive: Debian's chromium (the test is
// skipped without it, unless tools are required) and the directory playwright-core is
// installed in.
func consoleBrowser(t *testing.T) (browser, modules string) {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		skipUnlessRequired(t, "chromium is not on PATH: install Debian's chromium (.ci/run does) to run the console's browser test")
	}
	return browser, installNodePackage(t, consoleDir, "console-playwright", "playwright-core")
}

// consoleShots is where a browser test's screenshots go: a temporary directory, so a test run
// leaves the tree as it was; SVC_CONSOLE_SCREENSHOTS=docs (or any directory, from the
// repository root) keeps them, to refresh docs/ by hand.
func consoleShots(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SVC_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	shots, err := filepath.Abs(filepath.Join("..", dir))
	require.NoError(t, err)
	return shots
}

// runConsoleScript runs one of the browser scripts of consoleDir with node (beside axe.mjs,
// which they import), with env added, and returns what it printed; it fails the test unless the
// script exits 0 and prints "ok" last. An ES module resolves its imports from where it lies
// (NODE_PATH is not read): the scripts run from a directory beside the installed packages.
func runConsoleScript(t *testing.T, script, modules string, env ...string) string {
	t.Helper()
	work := t.TempDir()
	for _, f := range []string{script, "axe.mjs"} {
		src, err := os.ReadFile(filepath.Join(consoleDir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(work, f), src, 0o644))
	}
	require.NoError(t, os.Symlink(modules, filepath.Join(work, "node_modules")))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(work, script))
	cmd.Env = append(environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "%s:\n%s", script, out.String())
	require.Contains(t, out.String(), "\nok\n", out.String())
	return out.String()
}
