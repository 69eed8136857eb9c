package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
)

// TestSchedules walks the schedules API through the gateway with real credentials, against the
// real editor and orchestrator, on the real clock. The scheduler behind the gateway does not
// tick by itself (SVC_SCHEDULER_TICK=0): the tests decide when ticks happen. A second scheduler
// replica reaches the orchestrator through a proxy the outage test stops; ticks are sent to it
// directly, signed as the gateway signs them.
//
// The tick tests fire what is due in every organization, so they run one after the other, and
// each of their schedules fires at one chosen minute only ("M H D Mon *"): no schedule of one
// test is due during another.
func TestSchedules(t *testing.T) {
	t.Parallel()
	sys := harness.Start(t, harness.Options{Env: map[string]string{
		"SVC_TRUSTED_ORIGINS": testOrigin, "SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_SCHEDULER_TICK": "0",
	}})
	proxy := testkit.NewProxy(t, hostPort(t, sys.URLs[harness.Orchestrator]))
	replica := "http://" + listenAddr(t)
	sys.Run(t, harness.Scheduler, map[string]string{
		"SVC_SCHEDULER_ADDR":   strings.TrimPrefix(replica, "http://"),
		"SVC_ORCHESTRATOR_URL": "http://" + proxy.Addr(),
	})

	t.Run("API", func(t *testing.T) {
		t.Run("CreateGetUpdateDelete", func(t *testing.T) {
			t.Parallel()
			u := newSchedUser(t, sys, "sched-crud")
			wf := u.workflow("crud", wfDef(wfBlocks(wfTrigger(nil))))
			r := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris", "input": map[string]any{"x": 1}})
			require.Equal(t, http.StatusCreated, r.Status, r.Raw)
			id, _ := r.Body["id"].(string)
			require.Regexp(t, `^sch_[0-9a-z]{26}$`, id)
			require.Equal(t, wf, r.Body["workflowId"])
			require.Equal(t, "Europe/Paris", r.Body["timezone"])
			require.Equal(t, map[string]any{"x": float64(1)}, r.Body["input"])
			require.Equal(t, true, r.Body["enabled"])
			require.Nil(t, r.Body["lastFiredAt"])
			next := stamp(t, r.Body["nextFireAt"])
			require.True(t, next.After(time.Now()))
			paris, err := time.LoadLocation("Europe/Paris")
			require.NoError(t, err)
			require.Equal(t, 9, next.In(paris).Hour(), "09:00 Paris time")
			stamp(t, r.Body["createdAt"])
			stamp(t, r.Body["updatedAt"])
			require.Len(t, r.Body, 10, r.Raw)

			g := u.c.get("/api/schedules/" + id)
			require.Equal(t, http.StatusOK, g.Status, g.Raw)
			require.Equal(t, r.Body, g.Body)

			p := u.c.do("PATCH", "/api/schedules/"+id, map[string]any{"cron": "@daily", "timezone": "UTC", "enabled": false})
			require.Equal(t, http.StatusOK, p.Status, p.Raw)
			require.Equal(t, "@daily", p.Body["cron"])
			require.Equal(t, false, p.Body["enabled"])
			require.Nil(t, p.Body["nextFireAt"])
			p = u.c.do("PATCH", "/api/schedules/"+id, map[string]any{"enabled": true})
			require.Equal(t, http.StatusOK, p.Status, p.Raw)
			require.Equal(t, "00:00:00", stamp(t, p.Body["nextFireAt"]).Format("15:04:05"))

			d := u.c.do("DELETE", "/api/schedules/"+id, nil)
			require.Equal(t, http.StatusNoContent, d.Status, d.Raw)
			requireError(t, u.c.get("/api/schedules/"+id), http.StatusNotFound, "not_found")
			requireError(t, u.c.do("DELETE", "/api/schedules/"+id, nil), http.StatusNotFound, "not_found")
		})

		t.Run("InvalidCronAndTimezone", func(t *testing.T) {
			t.Parallel()
			u := newSchedUser(t, sys, "sched-invalid")
			wf := u.workflow("invalid", wfDef(wfBlocks(wfTrigger(nil))))
			for _, tc := range []struct{ cron, tz, says string }{
				{"* * * *", "UTC", "4 fields, want 5"},
				{"0 0 * * * *", "UTC", "6 fields, want 5"},
				{"99 * * * *", "UTC", "field 1 (minute)"},
				{"0 0 30 2 *", "UTC", "never matches"},
				{"@fortnightly", "UTC", "not a known descriptor"},
				{"", "UTC", "cron is empty"},
				{"@daily", "America/Gotham", "not an IANA time zone"},
			} {
				r := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": tc.cron, "timezone": tc.tz})
				requireError(t, r, http.StatusBadRequest, "invalid_cron")
				require.Contains(t, r.Body["message"], tc.says, r.Raw)
			}
			requireError(t, u.c.post("/api/schedules", map[string]any{"workflowId": wf}), http.StatusBadRequest, "invalid_body")
			requireError(t, u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "@daily", "color": "red"}), http.StatusBadRequest, "invalid_body")
			requireError(t, u.c.get("/api/schedules?limit=1000"), http.StatusBadRequest, "invalid_query")
			requireError(t, u.c.get("/api/schedules?after=nope"), http.StatusBadRequest, "invalid_query")
			r := u.c.get("/api/schedules")
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			require.Empty(t, arr(t, r.Body["items"]), "nothing refused was stored")
		})

		t.Run("PreviewBeforeSaving", func(t *testing.T) {
			t.Parallel()
			u := newSchedUser(t, sys, "sched-preview")
			wf := u.workflow("preview", wfDef(wfBlocks(wfTrigger(nil))))
			// January the first, Paris time: what the preview says is what the schedule gets.
			q := "/api/schedules/preview?cron=" + url.QueryEscape("0 9 1 1 *") + "&timezone=Europe/Paris"
			r := u.c.get(q)
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			require.NotEmpty(t, r.Header.Get("RateLimit-Remaining"), "guarded and rate limited like any schedule route")
			next := arr(t, r.Body["next"])
			require.Len(t, next, 5)
			paris, err := time.LoadLocation("Europe/Paris")
			require.NoError(t, err)
			for i, v := range next {
				at := stamp(t, v).In(paris)
				require.Equal(t, []int{1, 1, 9}, []int{int(at.Month()), at.Day(), at.Hour()}, v)
				if i > 0 {
					require.Equal(t, stamp(t, next[i-1]).Year()+1, at.Year(), "one a year")
				}
			}
			s := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "0 9 1 1 *", "timezone": "Europe/Paris"})
			require.Equal(t, http.StatusCreated, s.Status, s.Raw)
			require.Equal(t, next[0], s.Body["nextFireAt"])

			for _, tc := range []struct{ query, says string }{
				{"cron=" + url.QueryEscape("99 * * * *"), "field 1 (minute)"},
				{"cron=%40fortnightly", "not a known descriptor"},
				{"cron=%40daily&timezone=America%2FGotham", "not an IANA time zone"},
				{"", "cron is empty"},
			} {
				r := u.c.get("/api/schedules/preview?" + tc.query)
				requireError(t, r, http.StatusBadRequest, "invalid_cron")
				require.Contains(t, r.Body["message"], tc.says, r.Raw)
			}
			// Without credentials: 401, like every guarded route.
			requireError(t, call(t, http.MethodGet, sys.BaseURL+q, nil), http.StatusUnauthorized, "unauthorized")
		})

		t.Run("WorkflowNotFoundAndOtherOrganizations", func(t *testing.T) {
			t.Parallel()
			u := newSchedUser(t, sys, "sched-owner")
			other := newSchedUser(t, sys, "sched-other")
			wf := u.workflow("mine", wfDef(wfBlocks(wfTrigger(nil))))
			// Another organization's workflow is not found, exactly like a missing one.
			requireError(t, other.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "@daily"}), http.StatusNotFound, "workflow_not_found")
			requireError(t, u.c.post("/api/schedules", map[string]any{"workflowId": "wf_01jz00000000000000000000zz", "cron": "@daily"}), http.StatusNotFound, "workflow_not_found")
			r := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "0 0 1 1 *"})
			require.Equal(t, http.StatusCreated, r.Status, r.Raw)
			id := r.Body["id"].(string)
			requireError(t, other.c.get("/api/schedules/"+id), http.StatusNotFound, "not_found")
			requireError(t, other.c.do("PATCH", "/api/schedules/"+id, map[string]any{"enabled": false}), http.StatusNotFound, "not_found")
			requireError(t, other.c.do("DELETE", "/api/schedules/"+id, nil), http.StatusNotFound, "not_found")
			l := other.c.get("/api/schedules")
			require.Equal(t, http.StatusOK, l.Status, l.Raw)
			require.Empty(t, arr(t, l.Body["items"]))
			requireError(t, u.c.do("PATCH", "/api/schedules/"+id, map[string]any{"workflowId": other.workflow("theirs", wfDef(wfBlocks(wfTrigger(nil))))}),
				http.StatusNotFound, "workflow_not_found")
			require.Equal(t, true, u.c.get("/api/schedules/" + id).Body["enabled"], "the schedule is untouched by the refusals")
			// Without credentials: 401 before routing.
			requireError(t, newClient(t, sys).post("/api/admin/tick", nil), http.StatusUnauthorized, "unauthorized")
		})

		t.Run("ListPagesNewestFirstAndFiltersByWorkflow", func(t *testing.T) {
			t.Parallel()
			u := newSchedUser(t, sys, "sched-list").byAPIKey()
			a := u.workflow("a", wfDef(wfBlocks(wfTrigger(nil))))
			b := u.workflow("b", wfDef(wfBlocks(wfTrigger(nil))))
			var ids []string
			for i := range 7 {
				wf := a
				if i%3 == 0 {
					wf = b
				}
				r := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "0 0 1 1 *"})
				require.Equal(t, http.StatusCreated, r.Status, r.Raw)
				ids = append([]string{r.Body["id"].(string)}, ids...)
			}
			require.Equal(t, ids, u.pageAll("/api/schedules?limit=3"))
			require.Len(t, u.pageAll("/api/schedules?limit=2&workflowId="+b), 3)
			require.Len(t, u.pageAll("/api/schedules?workflowId="+a), 4)
		})
	})

	t.Run("ParallelTicksFireEachScheduleOnce", func(t *testing.T) {
		u := newSchedUser(t, sys, "sched-1000")
		wf := u.workflow("every", wfDef(wfBlocks(wfTrigger(nil), wfBlock("say", "log", map[string]any{"message": "fired"})), wfEdge("start", "say")))
		const n = 1000
		at := fireMinute(45 * time.Second)
		cron := fmt.Sprintf("%d %d %d %d *", at.Minute(), at.Hour(), at.Day(), int(at.Month()))
		ids := map[string]bool{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		began := time.Now()
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < n; i += 16 {
					r := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": cron, "input": map[string]any{"i": i}})
					require.Equal(t, http.StatusCreated, r.Status, r.Raw)
					require.Equal(t, wireTime(at), r.Body["nextFireAt"], r.Raw)
					mu.Lock()
					ids[r.Body["id"].(string)] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, ids, n)
		require.True(t, time.Now().Before(at), "creating took too long: %s is past", at)
		t.Logf("%d schedules created in %s; they fire at %s", n, time.Since(began).Round(time.Millisecond), at.Format(time.TimeOnly))
		waitUntil(at)

		// 8 ticks at once: 4 through the gateway to one replica, 4 straight to the other.
		ticked := time.Now()
		results := make([]response, 8)
		for i := range 8 {
			wg.Go(func() {
				if i%2 == 0 {
					results[i] = u.c.post("/api/admin/tick", nil)
				} else {
					results[i] = u.tickAt(replica)
				}
			})
		}
		wg.Wait()
		t.Logf("8 parallel ticks answered after %s", time.Since(ticked).Round(time.Millisecond))
		claimed, retried := 0, 0
		fired := map[string]string{}
		collect := func(r response) {
			t.Helper()
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			claimed += int(r.Body["claimed"].(float64))
			for _, f := range objs(t, r.Body["failed"]) {
				retried++
				// A StartRuns call that fails (a timeout on a loaded machine) leaves its fires in the
				// outbox, with dispatch_failed; later ticks retry them under the same keys.
				require.Equal(t, "dispatch_failed", f["error"], r.Raw)
			}
			for _, f := range objs(t, r.Body["fired"]) {
				sid := f["scheduleId"].(string)
				require.NotContains(t, fired, sid, "a schedule fired twice")
				require.Equal(t, wireTime(at), f["cutoff"])
				fired[sid] = f["runId"].(string)
			}
		}
		for _, r := range results {
			collect(r)
		}
		require.Equal(t, n, claimed, "the 8 ticks claimed each due schedule once between them")
		// Fires whose dispatch failed are retried by later ticks (there were none in most runs).
		for deadline := time.Now().Add(60 * time.Second); len(fired) < n; {
			require.True(t, time.Now().Before(deadline), "only %d of %d fires dispatched", len(fired), n)
			time.Sleep(time.Second) // a failed dispatch waits at least 1 s before its retry
			collect(u.c.post("/api/admin/tick", nil))
		}
		t.Logf("%d dispatch attempts failed and were retried", retried)
		require.Equal(t, n, claimed, "retries claim nothing new")
		require.Len(t, fired, n)

		// Exactly 1,000 runs, one per schedule, each with the schedule's trigger.
		runs := u.runsOf(wf)
		require.Len(t, runs, n)
		seen := map[string]bool{}
		for _, run := range runs {
			trig := obj(t, run["trigger"])
			require.Equal(t, "schedule", trig["kind"])
			require.Equal(t, wireTime(at), trig["cutoff"])
			sid := trig["scheduleId"].(string)
			require.True(t, ids[sid], sid)
			require.False(t, seen[sid], "two runs for %s", sid)
			seen[sid] = true
			require.Equal(t, fired[sid], run["runId"])
		}
		for id := range ids {
			s := u.c.get("/api/schedules/" + id)
			require.Equal(t, wireTime(at), s.Body["lastFiredAt"], s.Raw)
			break
		}

		// More ticks find nothing due: no second run.
		r := u.c.post("/api/admin/tick", nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.EqualValues(t, 0, r.Body["claimed"])
		require.Len(t, u.runsOf(wf), n)
	})

	t.Run("OrchestratorOutageAndDeletedWorkflow", func(t *testing.T) {
		u := newSchedUser(t, sys, "sched-outage")
		wf := u.workflow("steady", wfDef(wfBlocks(wfTrigger(nil))))
		gone := u.workflow("gone", wfDef(wfBlocks(wfTrigger(nil))))
		at := fireMinute(20 * time.Second)
		ny, err := time.LoadLocation("America/New_York")
		require.NoError(t, err)
		local := at.In(ny)
		cron := fmt.Sprintf("%d %d %d %d *", local.Minute(), local.Hour(), local.Day(), int(local.Month()))
		var ids []string
		for range 3 {
			r := u.c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": cron, "timezone": "America/New_York"})
			require.Equal(t, http.StatusCreated, r.Status, r.Raw)
			require.Equal(t, wireTime(at), r.Body["nextFireAt"])
			ids = append(ids, r.Body["id"].(string))
		}
		r := u.c.post("/api/schedules", map[string]any{"workflowId": gone, "cron": cron, "timezone": "America/New_York"})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		orphan := r.Body["id"].(string)
		d := u.c.do("DELETE", "/api/workflows/"+gone, nil)
		require.Equal(t, http.StatusNoContent, d.Status, d.Raw)

		proxy.Stop()
		waitUntil(at)
		r = u.tickAt(replica)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.EqualValues(t, 4, r.Body["claimed"])
		require.Empty(t, arr(t, r.Body["fired"]))
		for _, f := range objs(t, r.Body["failed"]) {
			require.Equal(t, "dispatch_failed", f["error"], r.Raw)
		}
		require.Len(t, arr(t, r.Body["failed"]), 4)
		require.Empty(t, u.runsOf(wf), "no run while the orchestrator is away")
		require.Equal(t, wireTime(at), u.c.get("/api/schedules/" + ids[0]).Body["lastFiredAt"], "the claim committed")

		proxy.Start()
		fired := map[string]string{}
		var failed []map[string]any
		deadline := time.Now().Add(45 * time.Second)
		for len(fired) < 3 || len(failed) < 1 {
			require.True(t, time.Now().Before(deadline), "fires not dispatched after the outage: fired %v failed %v", fired, failed)
			r := u.tickAt(replica)
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			require.EqualValues(t, 0, r.Body["claimed"], "later ticks retry the outbox; nothing new is due")
			for _, f := range objs(t, r.Body["fired"]) {
				require.NotContains(t, fired, f["scheduleId"], "dispatched twice")
				fired[f["scheduleId"].(string)] = f["runId"].(string)
			}
			for _, f := range objs(t, r.Body["failed"]) {
				if f["error"] != "dispatch_failed" {
					failed = append(failed, f)
				}
			}
			time.Sleep(250 * time.Millisecond) // retries wait 1 s, doubling, and the client's breaker 5 s
		}
		require.Equal(t, []map[string]any{{"scheduleId": orphan, "cutoff": wireTime(at), "error": "workflow_not_found"}}, failed)
		runs := u.runsOf(wf)
		require.Len(t, runs, 3, "each fire ran once")
		for _, run := range runs {
			trig := obj(t, run["trigger"])
			require.Equal(t, map[string]any{"kind": "schedule", "scheduleId": trig["scheduleId"], "cutoff": wireTime(at)}, trig)
			require.Equal(t, fired[trig["scheduleId"].(string)], run["runId"])
		}
		s := u.c.get("/api/schedules/" + orphan)
		require.Equal(t, http.StatusOK, s.Status, s.Raw)
		require.Equal(t, false, s.Body["enabled"], "a schedule whose workflow is gone is disabled")
		require.Nil(t, s.Body["nextFireAt"])
	})
}

// schedUser is a runsUser that also speaks to a scheduler replica directly.
type schedUser struct {
	*runsUser
	org, userID string
}

func newSchedUser(t *testing.T, sys *harness.System, prefix string) *schedUser {
	t.Helper()
	a := signUp(t, sys, prefix)
	s := a.c.get("/api/auth/get-session")
	require.Equal(t, http.StatusOK, s.Status, s.Raw)
	org, _ := obj(t, s.Body["session"])["activeOrganizationId"].(string)
	require.Regexp(t, `^org_`, org)
	return &schedUser{runsUser: &runsUser{t: t, sys: sys, c: a.c}, org: org, userID: a.userID}
}

func (u *schedUser) byAPIKey() *schedUser {
	return &schedUser{runsUser: u.runsUser.byAPIKey(), org: u.org, userID: u.userID}
}

// tickAt sends POST /api/admin/tick straight to a scheduler replica, signed as the gateway
// signs the user's requests.
func (u *schedUser) tickAt(base string) response {
	u.t.Helper()
	signer, err := internalauth.NewSigner(u.sys.Secret)
	require.NoError(u.t, err)
	req, err := http.NewRequestWithContext(harness.Context(u.t), http.MethodPost, base+"/api/admin/tick", bytes.NewReader(nil))
	require.NoError(u.t, err)
	signer.Sign(req.Header, req.Method, req.URL.Path, "", internalauth.Identity{UserID: u.userID, OrganizationID: u.org, AuthMode: internalauth.ModeSession}, time.Now())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(u.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(u.t, err)
	r := response{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// pageAll follows nextCursor from path and returns the ids of every item.
func (u *schedUser) pageAll(path string) []string {
	u.t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		r := u.c.get(path + afterQuery(cursor))
		require.Equal(u.t, http.StatusOK, r.Status, r.Raw)
		for _, it := range objs(u.t, r.Body["items"]) {
			ids = append(ids, it["id"].(string))
		}
		next, _ := r.Body["nextCursor"].(string)
		if next == "" {
			require.Nil(u.t, r.Body["nextCursor"], r.Raw)
			return ids
		}
		cursor = next
	}
	u.t.Fatalf("%s: paging does not end", path)
	return nil
}

// runsOf lists every run of the workflow.
func (u *schedUser) runsOf(wf string) []map[string]any {
	u.t.Helper()
	var out []map[string]any
	cursor := ""
	for range 100 {
		r := u.c.get("/api/runs?limit=500&workflowId=" + wf + afterQuery(cursor))
		require.Equal(u.t, http.StatusOK, r.Status, r.Raw)
		out = append(out, objs(u.t, r.Body["items"])...)
		next, _ := r.Body["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
	u.t.Fatalf("runs of %s: paging does not end", wf)
	return nil
}

// fireMinute is the first whole minute at least lead from now: the one minute a test's
// schedules fire at.
func fireMinute(lead time.Duration) time.Time {
	return time.Now().UTC().Add(lead).Truncate(time.Minute).Add(time.Minute)
}

// waitUntil blocks until the wall clock has passed t: schedules fire on the real clock, and
// a fire time is a moment, not a state to poll.
func waitUntil(t time.Time) {
	time.Sleep(time.Until(t) + 50*time.Millisecond)
}

func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
