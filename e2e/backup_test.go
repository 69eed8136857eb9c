package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestBackupRestore is the restore drill of docs/BACKUP.md: a system on a private Postgres
// cluster is backed up with pg_dump while it serves, stopped with its cluster, and restored
// into a fresh cluster (a new initdb) that a second system, with a fresh Redis, runs on.
//
// At the moment of the backup the first system holds runs waiting on a signal, runs in a sleep
// that ends after the restore, a run with an http.request step in flight, finished runs, a
// webhook delivery and a schedule that fires after the restore. After the backup it does more
// work (a start, a signal, a step's end, a delivery) that the restore must lose.
//
// After the restore: the waiting runs resume and finish (signals sent, sleeps fired), the step
// in flight is recorded lost and run again, finished runs read back as they were, the
// schedule fires once, nothing else runs twice (exact attempts per block in the logs, exact
// calls per (run, block) at a counting HTTP server, exact run lists per workflow), new runs
// start, and the work done after the backup is gone (404). Nothing the restored system needs
// lives in Redis; what the old Redis still holds (webhook delivery keys) is shown to mislead a
// system restored behind it, which is why the procedure empties it.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	if err := harness.PostgresTools("initdb", "pg_ctl", "pg_dump", "pg_restore"); err != nil {
		skipUnlessRequired(t, "the backup and restore test needs PostgreSQL's programs: "+err.Error())
	}
	// The sleep outlasts everything the first system does after the backup (a few seconds)
	// and ends while, or soon after, the second system starts.
	const napFor = 30 * time.Second

	// The counting server: every http.request block calls it with its run and block. The
	// block "slow" is held until release is closed, so that its step is in flight at the
	// backup; once released, later calls answer at once.
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	release := make(chan struct{})
	var releaseOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("run") + "/" + r.URL.Query().Get("block")
		mu.Lock()
		calls[key]++
		mu.Unlock()
		if r.URL.Query().Get("block") == "slow" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"key":%q}`, key)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // runs before srv.Close
	count := func(run, block string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[run+"/"+block]
	}
	httpBlock := func(id string) map[string]any {
		return wfBlock(id, "http.request", map[string]any{
			"method": "GET", "url": srv.URL + "/count?run={{ run.id }}&block=" + id, "timeout_ms": 20000,
		})
	}

	// The first system, on its own cluster and Redis.
	pg1 := harness.StartPostgres(t)
	db1 := pg1.NewDatabase(t)
	redis1 := harness.StartRedis(t)
	env := map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin, "SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_SCHEDULER_TICK": "1s"}
	serviceEnv := map[harness.Service]map[string]string{harness.Orchestrator: {"SVC_HTTP_ALLOW_PRIVATE": "1"}}
	sys1 := harness.Start(t, harness.Options{Env: env, ServiceEnv: serviceEnv, DatabaseURL: db1, RedisURL: redis1.URL})
	started := time.Now()

	acct := signUp(t, sys1, "backup")
	u := &schedUser{runsUser: &runsUser{t: t, sys: sys1, c: acct.c}, userID: acct.userID}
	s := u.c.get("/api/auth/get-session")
	require.Equal(t, http.StatusOK, s.Status, s.Raw)
	u.org, _ = obj(t, s.Body["session"])["activeOrganizationId"].(string)
	require.Regexp(t, `^org_`, u.org)
	signed := signIn(t, sys1, acct)
	k := u.c.post("/api/auth/api-key/create", map[string]any{"name": "backup"})
	require.Equal(t, http.StatusOK, k.Status, k.Raw)
	apiKey, _ := k.Body["key"].(string)
	require.NotEmpty(t, apiKey, k.Raw)

	// Webhook deliveries start runs of "on-event" in this organization.
	whEnv := map[string]string{
		"SVC_WEBHOOK_STANDARD_SECRET": whStandardSecret, "SVC_WEBHOOK_STANDARD_ORG": orgSlug(t, u.c, u.org),
		"SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
	}
	sys1.Processes(harness.Webhook)[0].Stop(t)
	sys1.Run(t, harness.Webhook, whEnv)

	hold := u.workflow("hold", wfDef(wfBlocks(wfTrigger(nil), httpBlock("before"),
		wfBlock("gate", "wait", map[string]any{"signal": "go"}), httpBlock("after")),
		wfEdge("start", "before"), wfEdge("before", "gate"), wfEdge("gate", "after")))
	nap := u.workflow("nap", wfDef(wfBlocks(wfTrigger(nil), httpBlock("before"),
		wfBlock("nap", "wait", map[string]any{"duration": napFor.String()}), httpBlock("after")),
		wfEdge("start", "before"), wfEdge("before", "nap"), wfEdge("nap", "after")))
	quick := u.workflow("quick", wfDef(wfBlocks(wfTrigger(nil), httpBlock("call")), wfEdge("start", "call")))
	slow := u.workflow("slow", wfDef(wfBlocks(wfTrigger(nil), httpBlock("slow")), wfEdge("start", "slow")))
	onEvent := u.workflow("on-event", wfDef(wfBlocks(wfBlock("start", "trigger.webhook", map[string]any{}),
		wfBlock("say", "log", map[string]any{"message": "{{ input.source }}"})), wfEdge("start", "say")))
	ticked := u.workflow("ticked", wfDef(wfBlocks(wfTrigger(nil), wfBlock("say", "log", map[string]any{"message": "fired"})),
		wfEdge("start", "say")))

	// Runs waiting on a signal (the third gets its signal after the backup).
	holds := []string{u.startRun(hold, nil), u.startRun(hold, nil), u.startRun(hold, nil)}
	for _, id := range holds {
		u.pollRun(id, "waiting in gate", waitingAt("gate", "signal"))
	}
	// Finished runs, and one started by a webhook delivery; their readings are kept.
	quicks := []string{u.startRun(quick, nil), u.startRun(quick, nil)}
	d := deliverStandard(t, sys1, "billing", "msg_before", time.Now(), `{"n":1}`)
	require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	hooked, _ := d.Body["workflowRunId"].(string)
	finished := map[string]map[string]any{}
	finishedLogs := map[string][]map[string]any{}
	for _, id := range append(quicks[:len(quicks):len(quicks)], hooked) {
		u.waitStatus(id, "completed")
		finished[id], finishedLogs[id] = u.run(id), u.logs(id)
	}
	// A schedule that fires at one minute, after the restore.
	at := fireMinute(napFor)
	sc := u.c.post("/api/schedules", map[string]any{"workflowId": ticked, "input": map[string]any{"from": "schedule"},
		"cron": fmt.Sprintf("%d %d %d %d *", at.Minute(), at.Hour(), at.Day(), int(at.Month()))})
	require.Equal(t, http.StatusCreated, sc.Status, sc.Raw)
	require.Equal(t, wireTime(at), sc.Body["nextFireAt"], sc.Raw)
	schedule, _ := sc.Body["id"].(string)
	// A step in flight: the counting server holds its request.
	inFlight := u.startRun(slow, nil)
	require.Eventually(t, func() bool { return count(inFlight, "slow") == 1 }, 15*time.Second, 10*time.Millisecond,
		"the slow step never reached the counting server")
	// Runs in a sleep, started last so that their sleep has the most of napFor left.
	naps := []string{u.startRun(nap, nil), u.startRun(nap, nil)}
	for _, id := range naps {
		u.pollRun(id, "asleep", waitingAt("nap", "sleep"))
	}
	for _, id := range append(holds[:len(holds):len(holds)], naps...) {
		require.Equal(t, 1, count(id, "before"), id)
	}

	// The backup, taken while the system serves: one consistent snapshot of every schema.
	dbName := strings.TrimPrefix(mustParseURL(t, db1).Path, "/")
	dump := filepath.Join(t.TempDir(), "svc.dump")
	began := time.Now()
	pg1.Dump(t, dbName, dump)
	backedUp := time.Now()
	info, err := os.Stat(dump)
	require.NoError(t, err)
	t.Logf("pg_dump -Fc of the running system, %s after it started: %d bytes in %s",
		began.Sub(started).Round(time.Millisecond), info.Size(), time.Since(began).Round(time.Millisecond))

	// Work after the backup, which the restore loses: the step in flight ends, a run starts
	// and ends, a signal is delivered, a webhook starts a run.
	releaseOnce.Do(func() { close(release) })
	u.waitStatus(inFlight, "completed")
	late := u.startRun(quick, nil)
	u.waitStatus(late, "completed")
	sig := u.c.post("/api/runs/"+holds[2]+"/signals", map[string]any{"name": "go"})
	require.Equal(t, http.StatusAccepted, sig.Status, sig.Raw)
	require.Equal(t, true, sig.Body["delivered"], sig.Raw)
	u.waitStatus(holds[2], "completed")
	d = deliverStandard(t, sys1, "billing", "msg_after", time.Now(), `{"n":2}`)
	require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	lateHook, _ := d.Body["workflowRunId"].(string)
	u.waitStatus(lateHook, "completed")

	// The disaster: the system and its cluster are gone. (Its Redis stays up, for the stale
	// keys below.)
	sys1.StopAll(t)
	for _, id := range naps {
		require.Zero(t, count(id, "after"), "run %s: its %s sleep ended before the first system was stopped; "+
			"this machine is too slow for the test's margins", id, napFor)
	}
	pg1.Stop(t)

	// The restore: a new cluster, the dump loaded into a database of the same name, and the
	// system started on it with the same secrets and a Redis that has never seen it.
	pg2 := harness.StartPostgres(t)
	began = time.Now()
	pg2.Restore(t, dbName, dump)
	t.Logf("pg_restore into a fresh cluster: %s", time.Since(began).Round(time.Millisecond))
	db2 := replaceHost(t, db1, pg2.Addr)
	redis2 := harness.StartRedis(t)
	serviceEnv[harness.Webhook] = whEnv
	sys2 := harness.Start(t, harness.Options{Env: env, ServiceEnv: serviceEnv, DatabaseURL: db2, RedisURL: redis2.URL, Secret: sys1.Secret})
	t.Logf("restored system up %s after the backup", time.Since(backedUp).Round(time.Millisecond))
	rebase := func(c *client) *client { return c.with(func(c *client) { c.base = sys2.BaseURL }) }
	u = &schedUser{runsUser: &runsUser{t: t, sys: sys2, c: rebase(u.c)}, org: u.org, userID: u.userID}

	// Credentials from before the backup still work: the session (bearer token and signed
	// cookie) and the API key.
	for name, c := range map[string]*client{
		"session token": u.c,
		"signed cookie": newClient(t, sys2).with(func(c *client) { c.cookie = "svc.session_token=" + url.QueryEscape(signed) }),
		"API key":       newClient(t, sys2).with(func(c *client) { c.apiKey = apiKey }),
	} {
		r := c.get("/api/workflows/" + hold)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", name, r.Raw)
	}

	// Finished runs read back exactly as they were, logs included.
	for id, want := range finished {
		require.Equal(t, want, u.run(id), "run %s", id)
		require.Equal(t, finishedLogs[id], u.logs(id), "logs of run %s", id)
	}
	// Work after the backup is gone.
	for _, id := range []string{late, lateHook} {
		requireError(t, u.c.get("/api/runs/"+id), http.StatusNotFound, "not_found")
		requireError(t, u.c.get("/api/runs/"+id+"/logs"), http.StatusNotFound, "not_found")
	}
	// The runs that waited on a signal wait again, the third too: its signal came after.
	for _, id := range holds {
		u.pollRun(id, "waiting in gate", waitingAt("gate", "signal"))
	}
	for _, id := range holds {
		r := u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, true, r.Body["delivered"], r.Raw)
	}
	for _, id := range holds {
		u.waitStatus(id, "completed")
	}
	// The step in flight at the backup: its attempt belonged to a replica that is gone, so it
	// is recorded lost and the step runs again.
	u.waitStatus(inFlight, "completed")
	// The sleeps end and their runs finish.
	for _, id := range naps {
		pollUntil(t, napFor+30*time.Second, "run "+id+" completed", func() bool { return u.run(id)["status"] == "completed" })
	}

	// The schedule reads back as it was and fires once, at its minute.
	g := u.c.get("/api/schedules/" + schedule)
	require.Equal(t, http.StatusOK, g.Status, g.Raw)
	for _, f := range []string{"workflowId", "cron", "timezone", "input", "enabled", "createdAt"} {
		require.Equal(t, sc.Body[f], g.Body[f], "schedule %s", f)
	}
	pollUntil(t, time.Until(at)+30*time.Second, "the schedule's run", func() bool { return len(u.runsOf(ticked)) > 0 })
	tick := u.c.post("/api/admin/tick", nil)
	require.Equal(t, http.StatusOK, tick.Status, tick.Raw)
	require.EqualValues(t, 0, tick.Body["claimed"], "nothing more is due: %s", tick.Raw)
	fired := u.runsOf(ticked)
	require.Len(t, fired, 1)
	require.Equal(t, map[string]any{"kind": "schedule", "scheduleId": schedule, "cutoff": wireTime(at)}, fired[0]["trigger"])
	require.Equal(t, wireTime(at), u.c.get("/api/schedules/" + schedule).Body["lastFiredAt"])
	scheduled, _ := fired[0]["runId"].(string)
	u.waitStatus(scheduled, "completed")

	// Webhooks: the delivery from before the backup is known through the orchestrator's
	// record in Postgres (this Redis is new); the one after it was lost with its run, so the
	// sender's redelivery starts it anew.
	d = deliverStandard(t, sys2, "billing", "msg_before", time.Now(), `{"n":1}`)
	require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	require.Equal(t, hooked, d.Body["workflowRunId"])
	d = deliverStandard(t, sys2, "billing", "msg_after", time.Now(), `{"n":2}`)
	require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	rehooked, _ := d.Body["workflowRunId"].(string)
	require.Regexp(t, `^run_`, rehooked)
	require.NotEqual(t, lateHook, rehooked)
	u.waitStatus(rehooked, "completed")
	// The old Redis would mislead: a webhook-ingress reading it answers the lost run's id
	// (404) and starts nothing. Emptied, it defers to Postgres again.
	staleAddr := listenAddr(t)
	sys2.Run(t, harness.Webhook, map[string]string{
		"SVC_WEBHOOK_ADDR": staleAddr, "SVC_REDIS_URL": redis1.URL, "SVC_REDIS_PREFIX": sys1.RedisPrefix,
	})
	deliverTo := func(base, id, body string) response {
		t.Helper()
		return call(t, http.MethodPost, base+"/api/webhooks/events/billing", strings.NewReader(body),
			append([]string{"Content-Type", "application/json"}, standardHeaders(id, time.Now(), body, whStandardSecret)...)...)
	}
	d = deliverTo("http://"+staleAddr, "msg_after", `{"n":2}`)
	require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	require.Equal(t, lateHook, d.Body["workflowRunId"], "the old Redis still names the lost run")
	requireError(t, u.c.get("/api/runs/"+lateHook), http.StatusNotFound, "not_found")
	require.NoError(t, redis1.FlushAll())
	d = deliverTo("http://"+staleAddr, "msg_after", `{"n":2}`)
	require.Equal(t, http.StatusAccepted, d.Status, d.Raw)
	require.Equal(t, rehooked, d.Body["workflowRunId"])

	// New runs start.
	fresh := u.startRun(quick, nil)
	u.waitStatus(fresh, "completed")

	// Nothing ran twice but what the restore had to redo. Each workflow has exactly its runs.
	require.ElementsMatch(t, holds, runsOf(t, u.runsUser, hold))
	require.ElementsMatch(t, naps, runsOf(t, u.runsUser, nap))
	require.ElementsMatch(t, append(quicks[:len(quicks):len(quicks)], fresh), runsOf(t, u.runsUser, quick))
	require.ElementsMatch(t, []string{inFlight}, runsOf(t, u.runsUser, slow))
	require.ElementsMatch(t, []string{hooked, rehooked}, runsOf(t, u.runsUser, onEvent))
	require.ElementsMatch(t, []string{scheduled}, runsOf(t, u.runsUser, ticked))
	// Each block has exactly its attempts in the logs: one, but the step in flight at the
	// backup, lost once and run again.
	statuses := func(id string) map[string][]string {
		out := map[string][]string{}
		for block, as := range attemptsByBlock(u.logs(id)) {
			for _, a := range as {
				out[block] = append(out[block], a["status"].(string))
			}
		}
		return out
	}
	one := []string{"succeeded"}
	for _, id := range holds {
		require.Equal(t, map[string][]string{"start": one, "before": one, "gate": one, "after": one}, statuses(id), "run %s", id)
	}
	for _, id := range naps {
		require.Equal(t, map[string][]string{"start": one, "before": one, "nap": one, "after": one}, statuses(id), "run %s", id)
	}
	for _, id := range append(quicks[:len(quicks):len(quicks)], fresh) {
		require.Equal(t, map[string][]string{"start": one, "call": one}, statuses(id), "run %s", id)
	}
	require.Equal(t, map[string][]string{"start": one, "slow": {"lost", "succeeded"}}, statuses(inFlight))
	for _, a := range u.logs(inFlight) {
		if a["status"] == "lost" {
			require.Equal(t, "lost", obj(t, a["error"])["code"], a)
			require.Contains(t, obj(t, a["error"])["message"], "stopped heartbeating", a)
		}
	}
	// The counting server saw each (run, block) once per attempt the restored history holds,
	// and more only where work after the backup was redone: the third signal's step (run
	// before the disaster and again after the restore), the step in flight (it finished after
	// the backup, and ran again), and the run started after the backup (its one call is all
	// it ever made: it is gone).
	want := map[string]int{}
	for _, id := range append(holds[:len(holds):len(holds)], naps...) {
		want[id+"/before"], want[id+"/after"] = 1, 1
	}
	want[holds[2]+"/after"] = 2
	for _, id := range append(quicks[:len(quicks):len(quicks)], fresh, late) {
		want[id+"/call"] = 1
	}
	want[inFlight+"/slow"] = 2
	mu.Lock()
	require.Equal(t, want, calls)
	mu.Unlock()
	t.Logf("checks done %s after the first system started", time.Since(started).Round(time.Millisecond))
}

// signIn signs a in on sys and returns the session's signed value (what the cookie carries).
func signIn(t *testing.T, sys *harness.System, a account) string {
	t.Helper()
	r := newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": a.password})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	v := r.Header.Get("Set-Auth-Token")
	require.Contains(t, v, ".", "a signed session value: %q", v)
	return v
}

// pollUntil polls ok until it holds or within has passed, failing the test then.
func pollUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %s", what, within.Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mustParseURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}
