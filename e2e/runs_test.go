package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestRuns walks the runs API (docs/API.md, Runs) through the gateway only, with real
// credentials: each subtest signs up its own user (its own organization) and builds its
// workflows in the editor, then dispatches, follows and steers runs in run-orchestrator. States
// are polled with deadlines, never waited for with fixed sleeps.
func TestRuns(t *testing.T) {
	t.Parallel()
	// Polling is many requests a second per principal: the default 60 a minute would throttle it.
	// http.request may call this test's own servers on loopback.
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_HTTP_ALLOW_PRIVATE": "1"})

	t.Run("DispatchAndStates", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "dispatch")
		// The step's request is held until the test has seen the run running.
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(srv.Close)
		released := false
		t.Cleanup(func() {
			if !released {
				close(release)
			}
		})
		wf := u.workflow("states", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("call", "http.request", map[string]any{"method": "GET", "url": srv.URL + "/hold"}),
				wfBlock("done", "log", map[string]any{"message": "ok={{ steps.call.output.body.ok }}"})),
			wfEdge("start", "call"), wfEdge("call", "done")))

		r := u.c.post("/api/workflows/"+wf+"/run", map[string]any{"input": map[string]any{"n": 1}})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Len(t, r.Body, 2, "exactly {runId, spec}: %s", r.Raw)
		require.Regexp(t, `^run_`, r.Body["runId"])
		require.Equal(t, "svc-runtime", r.Body["spec"])
		id := r.Body["runId"].(string)

		// Every status seen is a step forward: queued → running → completed.
		order := map[string]int{"queued": 0, "running": 1, "completed": 2}
		var seen []string
		follow := func(until string) map[string]any {
			return u.pollRun(id, until, func(run map[string]any) bool {
				s, _ := run["status"].(string)
				_, ok := order[s]
				require.True(t, ok, "unexpected status %q on the way to completed: %v", s, run)
				if len(seen) == 0 || seen[len(seen)-1] != s {
					seen = append(seen, s)
				}
				return s == until
			})
		}
		running := follow("running")
		stamp(t, running["startedAt"])
		require.Nil(t, running["finishedAt"])
		require.Nil(t, running["output"])
		close(release)
		released = true
		got := follow("completed")
		for i := 1; i < len(seen); i++ {
			require.Less(t, order[seen[i-1]], order[seen[i]], "statuses went backwards: %v", seen)
		}
		require.Contains(t, seen, "running", "seen: %v", seen)

		require.Equal(t, id, got["runId"])
		require.Equal(t, wf, got["workflowId"])
		require.EqualValues(t, 1, got["workflowVersion"])
		require.Equal(t, "svc-runtime", got["spec"])
		require.Equal(t, map[string]any{"n": float64(1)}, got["input"])
		require.Equal(t, map[string]any{"done": map[string]any{"message": "ok=true"}}, got["output"])
		require.Nil(t, got["error"])
		require.Nil(t, got["waiting"])
		require.Equal(t, "manual", obj(t, got["trigger"])["kind"])
		created, started, finished := stamp(t, got["createdAt"]), stamp(t, got["startedAt"]), stamp(t, got["finishedAt"])
		require.False(t, started.Before(created), "startedAt %s before createdAt %s", started, created)
		require.False(t, finished.Before(started), "finishedAt %s before startedAt %s", finished, started)
		require.NotContains(t, got, "workflow", "the pinned workflow only with ?include=workflow")

		// A terminal state never changes.
		require.Equal(t, "completed", u.run(id)["status"])
	})

	t.Run("PinningAndTemplatesBetweenBlocks", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "pinning").byAPIKey()
		// The run holds at gate until signalled, so the edit below lands while it is in flight.
		wf := u.workflow("pinned", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("gate", "wait", map[string]any{"signal": "go"}),
				wfBlock("double", "transform", map[string]any{"value": map[string]any{
					"n": "{{ input.n * 2 }}", "who": "run {{ run.id }}", "wf": "{{ workflow.id }}", "same": "{{ input }}",
				}}),
				wfBlock("say", "log", map[string]any{"message": "n is {{ steps.double.output.n }}"})),
			wfEdge("start", "gate"), wfEdge("gate", "double"), wfEdge("double", "say")))
		v1 := u.c.get("/api/workflows/" + wf)
		require.Equal(t, http.StatusOK, v1.Status, v1.Raw)

		id := u.startRun(wf, map[string]any{"input": map[string]any{"n": 21}})
		u.pollRun(id, "waiting at gate", waitingAt("gate", "signal"))

		// Edit the workflow after dispatch: the run keeps the definition it was dispatched with.
		p := u.c.post("/api/workflows/"+wf+"/operations", map[string]any{"ops": []any{
			map[string]any{"operation_type": "update", "block_id": "say", "params": map[string]any{"message": "edited"}},
			map[string]any{"operation_type": "add", "block_id": "extra", "type": "log", "params": map[string]any{"message": "extra"}},
			map[string]any{"operation_type": "connect", "block_id": "say", "target_block_id": "extra"},
		}})
		require.Equal(t, http.StatusOK, p.Status, p.Raw)
		require.Empty(t, p.Body["skipped_items"], p.Raw)
		require.EqualValues(t, 2, p.Body["version"])

		s := u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusAccepted, s.Status, s.Raw)
		got := u.waitStatus(id, "completed")
		require.Equal(t, map[string]any{"say": map[string]any{"message": "n is 42"}}, got["output"], "the pinned definition ran, not the edit")
		require.EqualValues(t, 1, got["workflowVersion"])

		full := u.c.get("/api/runs/" + id + "?include=workflow")
		require.Equal(t, http.StatusOK, full.Status, full.Raw)
		pinned := obj(t, full.Body["workflow"])
		require.Equal(t, wf, pinned["id"])
		require.EqualValues(t, 1, pinned["version"])
		require.Equal(t, v1.Body["definition"], pinned["definition"], "the definition pinned at dispatch")
		require.EqualValues(t, 2, u.c.get("/api/workflows/" + wf).Body["version"], "while the workflow itself moved on")

		// Templates between blocks: a param that is exactly one {{ }} keeps the value's type.
		logs := attemptsByBlock(u.logs(id))
		require.Equal(t, map[string]any{"n": float64(42), "who": "run " + id, "wf": wf, "same": map[string]any{"n": float64(21)}},
			logs["double"][0]["output"])
		require.Equal(t, map[string]any{"message": "n is 42"}, logs["say"][0]["input"], "the attempt's input is the resolved params")
		require.NotContains(t, logs, "extra")
	})

	t.Run("RetriesWithEveryAttemptInTheLogs", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "retries")
		wf := u.workflow("flaky", wfDef(
			wfBlocks(wfTrigger(nil), wfBlock("flaky", "fail", map[string]any{"message": "flaky", "fail_attempts": 2})),
			wfEdge("start", "flaky")))
		id := u.startRun(wf, nil)
		got := u.waitStatus(id, "completed")
		require.Nil(t, got["error"])

		logs := u.logs(id)
		require.Equal(t, []string{"start#1:succeeded", "flaky#1:failed", "flaky#2:failed", "flaky#3:succeeded"}, attempts(logs))
		for _, a := range logs {
			require.Regexp(t, `^att_`, a["id"])
			stamp(t, a["startedAt"])
			stamp(t, a["finishedAt"])
			require.IsType(t, float64(0), a["durationMs"])
		}
		require.Equal(t, "fail", logs[1]["type"])
		require.Equal(t, "flaky", obj(t, logs[1]["error"])["message"])
		require.Equal(t, "flaky", obj(t, logs[2]["error"])["message"])
		require.Nil(t, logs[3]["error"])
		require.Equal(t, map[string]any{"message": "flaky", "fail_attempts": float64(2)}, logs[3]["input"])
		require.Equal(t, map[string]any{"flaky": logs[3]["output"]}, got["output"])
		// The backoff (100 ms, then 200 ms) separates the attempts.
		require.GreaterOrEqual(t, stamp(t, logs[2]["startedAt"]).Sub(stamp(t, logs[1]["finishedAt"])), 90*time.Millisecond)
		require.GreaterOrEqual(t, stamp(t, logs[3]["startedAt"]).Sub(stamp(t, logs[2]["finishedAt"])), 190*time.Millisecond)
	})

	t.Run("FinalFailure", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "failure")
		wf := u.workflow("broken", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("broken", "fail", map[string]any{"message": "always"}),
				wfBlock("never", "log", map[string]any{"message": "unreachable at run time"})),
			wfEdge("start", "broken"), wfEdge("broken", "never")))
		id := u.startRun(wf, nil)
		got := u.waitStatus(id, "failed")
		require.Equal(t, map[string]any{"block_id": "broken", "message": "always"}, got["error"])
		stamp(t, got["finishedAt"])
		logs := u.logs(id)
		require.Equal(t, []string{"start#1:succeeded", "broken#1:failed", "broken#2:failed", "broken#3:failed"}, attempts(logs),
			"three attempts (the retry policy), and no new step after the failure")
	})

	t.Run("IdempotencyKeys", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "idem")
		wf := u.workflow("once", wfDef(wfBlocks(wfTrigger(nil))))
		first := u.startRun(wf, map[string]any{"idempotencyKey": "k1"})
		// The same key as a header, from another principal of the same organization.
		byKey := u.byAPIKey()
		require.Equal(t, first, byKey.startRun(wf, nil, "Idempotency-Key", "k1"))
		require.Equal(t, first, u.startRun(wf, map[string]any{"idempotencyKey": "k1", "input": map[string]any{"other": true}}))
		second := u.startRun(wf, map[string]any{"idempotencyKey": "k2"})
		require.NotEqual(t, first, second)

		// Nothing else started.
		u.waitStatus(first, "completed")
		u.waitStatus(second, "completed")
		r := u.c.get("/api/workflows/" + wf + "/runs")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.ElementsMatch(t, []any{first, second}, runIDs(t, r))

		// The key is the organization's: another organization's k1 is its own run.
		other := newRunsUser(t, sys, "idem-other")
		owf := other.workflow("once", wfDef(wfBlocks(wfTrigger(nil))))
		require.NotEqual(t, first, other.startRun(owf, nil, "Idempotency-Key", "k1"))
	})

	t.Run("BranchesSkipped", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "branches")
		wf := u.workflow("branchy", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("big", "condition", map[string]any{"expression": "input.n > 5"}),
				wfBlock("yes", "log", map[string]any{"message": "big {{ input.n }}"}),
				wfBlock("no", "log", map[string]any{"message": "small"}),
				wfBlock("after_no", "log", map[string]any{"message": "after small"})),
			wfEdge("start", "big"), wfBranch("big", "yes", "true"), wfBranch("big", "no", "false"), wfEdge("no", "after_no")))

		big := u.startRun(wf, map[string]any{"input": map[string]any{"n": 9}})
		small := u.startRun(wf, map[string]any{"input": map[string]any{"n": 2}})

		got := u.waitStatus(big, "completed")
		require.Equal(t, map[string]any{"yes": map[string]any{"message": "big 9"}}, got["output"])
		logs := u.logs(big)
		require.Equal(t, []string{"start#1:succeeded", "big#1:succeeded", "yes#1:succeeded"}, attempts(logs), "no and after_no skipped")
		require.Equal(t, map[string]any{"result": true}, logs[1]["output"])

		got = u.waitStatus(small, "completed")
		require.Equal(t, map[string]any{"after_no": map[string]any{"message": "after small"}}, got["output"])
		require.Equal(t, []string{"start#1:succeeded", "big#1:succeeded", "no#1:succeeded", "after_no#1:succeeded"}, attempts(u.logs(small)))
	})

	t.Run("Sleep", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "sleep")
		wf := u.workflow("nap", wfDef(
			wfBlocks(wfTrigger(nil), wfBlock("nap", "wait", map[string]any{"duration": "600ms"})),
			wfEdge("start", "nap")))
		id := u.startRun(wf, nil)
		waiting := u.pollRun(id, "waiting in nap", waitingAt("nap", "sleep"))
		seenAt := time.Now()
		until := stamp(t, obj(t, waiting["waiting"])["until"])
		require.False(t, until.Before(stamp(t, waiting["createdAt"]).Add(600*time.Millisecond)), "until %s: less than 600 ms after dispatch", until)
		require.False(t, until.After(seenAt.Add(650*time.Millisecond)), "until %s: more than 600 ms after the wait was seen", until)

		got := u.waitStatus(id, "completed")
		require.Nil(t, got["waiting"])
		out := obj(t, obj(t, got["output"])["nap"])
		require.GreaterOrEqual(t, out["slept_ms"], float64(590))
		require.Less(t, out["slept_ms"], float64(10000))
		require.False(t, stamp(t, got["finishedAt"]).Before(until.Add(-10*time.Millisecond)), "finished before the wake time")
	})

	t.Run("SignalBeforeAndAfterTheWait", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "signals")
		wf := u.workflow("signalled", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("gate", "wait", map[string]any{"signal": "open"}),
				wfBlock("first", "wait", map[string]any{"signal": "go"}),
				wfBlock("second", "wait", map[string]any{"signal": "again", "timeout": "1h"})),
			wfEdge("start", "gate"), wfEdge("gate", "first"), wfEdge("first", "second")))
		id := u.startRun(wf, nil)

		// Before the wait on "go" began (the run waits on "open"): stored, not delivered.
		u.pollRun(id, "waiting in gate", waitingAt("gate", "signal"))
		r := u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go", "payload": map[string]any{"x": 1}})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Regexp(t, `^sig_`, r.Body["signalId"])
		require.Equal(t, false, r.Body["delivered"], "no wait on go yet: stored")
		require.Equal(t, "gate", obj(t, u.run(id)["waiting"])["block_id"], "a signal of another name does not end the wait")
		// Opening the gate starts the wait on "go", which consumes the stored signal at once.
		r = u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "open"})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, true, r.Body["delivered"])

		// After the wait on "again" began: delivered at once.
		u.pollRun(id, "waiting in second", waitingAt("second", "signal"))
		w := obj(t, u.run(id)["waiting"])
		require.Equal(t, "again", w["signal"])
		r = u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "again", "payload": map[string]any{"y": 2}})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, true, r.Body["delivered"])

		got := u.waitStatus(id, "completed")
		require.Equal(t, map[string]any{"second": map[string]any{"signal": map[string]any{"name": "again", "payload": map[string]any{"y": float64(2)}}}}, got["output"])
		logs := attemptsByBlock(u.logs(id))
		require.Equal(t, map[string]any{"signal": map[string]any{"name": "go", "payload": map[string]any{"x": float64(1)}}}, logs["first"][0]["output"])
		require.Equal(t, map[string]any{"signal": map[string]any{"name": "open", "payload": nil}}, logs["gate"][0]["output"])
	})

	t.Run("CancelWaitingRun", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "cancel")
		wf := u.workflow("held", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("hold", "wait", map[string]any{"signal": "never"}),
				wfBlock("after", "log", map[string]any{"message": "never runs"})),
			wfEdge("start", "hold"), wfEdge("hold", "after")))
		id := u.startRun(wf, nil)
		u.pollRun(id, "waiting in hold", waitingAt("hold", "signal"))

		r := u.c.post("/api/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, map[string]any{"runId": id, "status": "cancelled"}, r.Body)
		r = u.c.post("/api/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusAccepted, r.Status, "again 202: %s", r.Raw)
		require.Equal(t, map[string]any{"runId": id, "status": "cancelled"}, r.Body)

		got := u.run(id)
		require.Equal(t, "cancelled", got["status"])
		require.Nil(t, got["waiting"])
		stamp(t, got["finishedAt"])

		s := u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "never"})
		requireError(t, s, http.StatusConflict, "run_finished")
		require.Equal(t, "cancelled", s.Body["status"])

		require.Equal(t, []string{"start#1:succeeded", "hold#1:cancelled"}, attempts(u.logs(id)), "nothing else starts")
		require.Equal(t, "cancelled", u.run(id)["status"], "terminal states never change")
	})

	t.Run("CancelRunningRun", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "cancel-running")
		// The step's request hangs until the engine cancels it.
		arrived, gone, done := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
				gone <- struct{}{}
			case <-done:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(done) })
		wf := u.workflow("slow", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("slow", "http.request", map[string]any{"method": "GET", "url": srv.URL + "/hang", "timeout_ms": 60000}),
				wfBlock("after", "log", map[string]any{"message": "never runs"})),
			wfEdge("start", "slow"), wfEdge("slow", "after")))
		id := u.startRun(wf, nil)
		select {
		case <-arrived:
		case <-time.After(15 * time.Second):
			t.Fatalf("run %s: the http.request step never reached the server; run: %v", id, u.run(id))
		}
		require.Equal(t, "running", u.run(id)["status"])
		require.Equal(t, []string{"start#1:succeeded", "slow#1:running"}, attempts(u.logs(id)), "the attempt is recorded before the connector runs")

		r := u.c.post("/api/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, map[string]any{"runId": id, "status": "cancelled"}, r.Body)
		select {
		case <-gone:
		case <-time.After(15 * time.Second):
			t.Fatalf("run %s: the running attempt's context was not cancelled", id)
		}
		require.Equal(t, "cancelled", u.run(id)["status"])
		want := []string{"start#1:succeeded", "slow#1:cancelled"}
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			logs := attempts(u.logs(id))
			if slices.Equal(logs, want) {
				break
			}
			if time.Now().After(deadline) {
				require.Equal(t, want, logs, "the running attempt is recorded cancelled and nothing else starts")
			}
		}
		requireError(t, u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "x"}), http.StatusConflict, "run_finished")
	})

	t.Run("SignalWaitTimesOut", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "timeout")
		wf := u.workflow("impatient", wfDef(
			wfBlocks(wfTrigger(nil), wfBlock("wait", "wait", map[string]any{"signal": "late", "timeout": "300ms"})),
			wfEdge("start", "wait")))
		id := u.startRun(wf, nil)
		got := u.waitStatus(id, "completed")
		require.Equal(t, map[string]any{"wait": map[string]any{"timed_out": true}}, got["output"])
		logs := u.logs(id)
		require.Equal(t, []string{"start#1:succeeded", "wait#1:succeeded"}, attempts(logs))
		require.GreaterOrEqual(t, stamp(t, logs[1]["finishedAt"]).Sub(stamp(t, logs[1]["startedAt"])), 290*time.Millisecond)
		requireError(t, u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "late"}), http.StatusConflict, "run_finished")
	})

	t.Run("ParallelBlocksJoin", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "parallel")
		wf := u.workflow("diamond", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("left", "transform", map[string]any{"value": "{{ input.n + 1 }}"}),
				wfBlock("right", "transform", map[string]any{"value": "{{ input.n * 10 }}"}),
				wfBlock("join", "transform", map[string]any{"value": "{{ steps.left.output + steps.right.output }}"}),
				wfBlock("side", "log", map[string]any{"message": "side {{ input.n }}"})),
			wfEdge("start", "left"), wfEdge("start", "right"), wfEdge("left", "join"), wfEdge("right", "join"), wfEdge("start", "side")))
		id := u.startRun(wf, map[string]any{"input": map[string]any{"n": 2}})
		got := u.waitStatus(id, "completed")
		require.Equal(t, map[string]any{"join": float64(23), "side": map[string]any{"message": "side 2"}}, got["output"],
			"the output holds every sink that ran")
		logs := u.logs(id)
		require.ElementsMatch(t, []string{"start#1:succeeded", "left#1:succeeded", "right#1:succeeded", "join#1:succeeded", "side#1:succeeded"}, attempts(logs))
		by := attemptsByBlock(logs)
		joined := stamp(t, by["join"][0]["startedAt"])
		for _, up := range []string{"left", "right"} {
			require.False(t, joined.Before(stamp(t, by[up][0]["finishedAt"])), "join started before %s finished", up)
		}
	})

	t.Run("FinishedRunsRefuseCancelAndSignals", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "finished")
		ok := u.workflow("fine", wfDef(wfBlocks(wfTrigger(nil), wfBlock("say", "log", map[string]any{"message": "hi"})), wfEdge("start", "say")))
		bad := u.workflow("bad", wfDef(wfBlocks(wfTrigger(nil), wfBlock("boom", "fail", map[string]any{"message": "boom", "fail_attempts": 100})), wfEdge("start", "boom")))
		done, failed := u.startRun(ok, nil), u.startRun(bad, nil)
		u.waitStatus(done, "completed")
		u.waitStatus(failed, "failed")
		for id, status := range map[string]string{done: "completed", failed: "failed"} {
			r := u.c.post("/api/runs/"+id+"/cancel", nil)
			requireError(t, r, http.StatusConflict, "run_finished")
			require.Equal(t, status, r.Body["status"], r.Raw)
			r = u.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "late"})
			requireError(t, r, http.StatusConflict, "run_finished")
			require.Equal(t, status, r.Body["status"], r.Raw)
			require.Equal(t, status, u.run(id)["status"], "terminal states never change")
		}
	})

	t.Run("LogsPaging", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "paging")
		wf := u.workflow("many", wfDef(
			wfBlocks(wfTrigger(nil),
				wfBlock("a", "fail", map[string]any{"message": "a", "fail_attempts": 2}),
				wfBlock("b", "log", map[string]any{"message": "b"}),
				wfBlock("c", "fail", map[string]any{"message": "c", "fail_attempts": 1}),
				wfBlock("d", "transform", map[string]any{"value": "{{ steps.c.output }}"})),
			wfEdge("start", "a"), wfEdge("a", "b"), wfEdge("b", "c"), wfEdge("c", "d")))
		id := u.startRun(wf, nil)
		u.waitStatus(id, "completed")

		// Pages of 2 until a page brings nothing: every attempt exactly once, a cursor on every page.
		var paged []map[string]any
		cursor := ""
		lastWithItems := response{}
		for page := 0; ; page++ {
			require.Less(t, page, 50, "paging does not end")
			r := u.c.get("/api/runs/" + id + "/logs?limit=2" + afterQuery(cursor))
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			next, _ := r.Body["nextCursor"].(string)
			require.NotEmpty(t, next, "nextCursor is returned on every page, the last one too: %s", r.Raw)
			items := arr(t, r.Body["items"])
			require.LessOrEqual(t, len(items), 2)
			cursor = next
			if len(items) == 0 {
				break
			}
			lastWithItems = r
			for _, it := range items {
				paged = append(paged, obj(t, it))
			}
		}
		require.NotNil(t, lastWithItems.Body["nextCursor"], "the last page with items has a nextCursor")
		require.Equal(t, []string{"start#1:succeeded", "a#1:failed", "a#2:failed", "a#3:succeeded", "b#1:succeeded",
			"c#1:failed", "c#2:succeeded", "d#1:succeeded"}, attempts(paged))
		var ids []string
		for _, a := range paged {
			ids = append(ids, a["id"].(string))
		}
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(ids))), len(ids), "every attempt exactly once")

		// One big page lists the same attempts in the same order, and the final cursor still
		// answers (a follower resumes from it) with nothing new.
		all := u.c.get("/api/runs/" + id + "/logs?limit=1000")
		require.Equal(t, http.StatusOK, all.Status, all.Raw)
		require.Equal(t, paged, objs(t, all.Body["items"]))
		require.NotEmpty(t, all.Body["nextCursor"])
		again := u.c.get("/api/runs/" + id + "/logs?limit=2" + afterQuery(cursor))
		require.Equal(t, http.StatusOK, again.Status, again.Raw)
		require.Empty(t, arr(t, again.Body["items"]))
		require.NotEmpty(t, again.Body["nextCursor"])

		for _, q := range []string{"limit=0", "limit=1001", "limit=two", "limit=-1", "after=not-a-cursor"} {
			requireError(t, u.c.get("/api/runs/"+id+"/logs?"+q), http.StatusBadRequest, "invalid_query")
		}
	})

	t.Run("ListRunsByWorkflowAndStatus", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "lists")
		ok := u.workflow("fine", wfDef(wfBlocks(wfTrigger(nil))))
		bad := u.workflow("bad", wfDef(wfBlocks(wfTrigger(nil), wfBlock("boom", "fail", map[string]any{"message": "boom", "fail_attempts": 100})), wfEdge("start", "boom")))
		ok1 := u.startRun(ok, nil)
		ok2 := u.startRun(ok, nil)
		failed := u.startRun(bad, nil)
		u.waitStatus(ok1, "completed")
		u.waitStatus(ok2, "completed")
		u.waitStatus(failed, "failed")

		r := u.c.get("/api/workflows/" + ok + "/runs")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, []any{ok2, ok1}, runIDs(t, r), "newest first")
		require.Contains(t, r.Body, "nextCursor")
		require.Nil(t, r.Body["nextCursor"], "null after the last page")
		item := obj(t, arr(t, r.Body["items"])[0])
		require.Equal(t, ok, item["workflowId"])
		require.Equal(t, "completed", item["status"])

		r = u.c.get("/api/runs?workflowId=" + ok)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, []any{ok2, ok1}, runIDs(t, r))

		r = u.c.get("/api/runs?status=failed")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, []any{failed}, runIDs(t, r))
		r = u.c.get("/api/runs?status=completed&workflowId=" + bad)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Empty(t, runIDs(t, r))

		// All runs of the organization, one a page.
		var seen []any
		cursor := ""
		for page := 0; ; page++ {
			require.Less(t, page, 10, "paging does not end")
			r = u.c.get("/api/runs?limit=1" + afterQuery(cursor))
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			seen = append(seen, runIDs(t, r)...)
			if r.Body["nextCursor"] == nil {
				break
			}
			cursor = r.Body["nextCursor"].(string)
		}
		require.Equal(t, []any{failed, ok2, ok1}, seen)
		requireError(t, u.c.get("/api/runs?limit=501"), http.StatusBadRequest, "invalid_query")
	})

	t.Run("OtherOrganizationGets404", func(t *testing.T) {
		t.Parallel()
		a, b := newRunsUser(t, sys, "owner-a"), newRunsUser(t, sys, "stranger-b").byAPIKey()
		wf := a.workflow("private", wfDef(
			wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})),
			wfEdge("start", "hold")))
		id := a.startRun(wf, nil)
		a.pollRun(id, "waiting in hold", waitingAt("hold", "signal"))

		requireError(t, b.c.get("/api/runs/"+id), http.StatusNotFound, "not_found")
		requireError(t, b.c.get("/api/runs/"+id+"?include=workflow"), http.StatusNotFound, "not_found")
		requireError(t, b.c.get("/api/runs/"+id+"/logs"), http.StatusNotFound, "not_found")
		requireError(t, b.c.post("/api/runs/"+id+"/cancel", nil), http.StatusNotFound, "not_found")
		requireError(t, b.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"}), http.StatusNotFound, "not_found")
		requireError(t, b.c.post("/api/workflows/"+wf+"/run", nil), http.StatusNotFound, "not_found")
		list := b.c.get("/api/runs")
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		require.NotContains(t, list.Raw, id)
		require.NotContains(t, b.c.get("/api/runs?workflowId="+wf).Raw, id)
		require.NotContains(t, b.c.get("/api/workflows/"+wf+"/runs").Raw, id)

		// B's cancel and signal did nothing: A's run still waits, and A can still steer it.
		require.Equal(t, "waiting", a.run(id)["status"])
		s := a.c.post("/api/runs/"+id+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusAccepted, s.Status, s.Raw)
		require.Equal(t, true, s.Body["delivered"], "B's signal was not stored for A's run")
		a.waitStatus(id, "completed")
	})

	t.Run("RefusedDispatches", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "refused")

		// Saved with validation errors (no trigger): it cannot run.
		invalid := u.workflow("invalid", wfDef(wfBlocks(wfBlock("say", "log", map[string]any{"message": "hi"}))), "no_trigger")
		r := u.c.post("/api/workflows/"+invalid+"/run", nil)
		requireError(t, r, http.StatusBadRequest, "workflow_invalid")
		codes := []any{}
		for _, e := range arr(t, r.Body["validation_errors"]) {
			codes = append(codes, obj(t, e)["code"])
		}
		require.Contains(t, codes, "no_trigger", r.Raw)

		// Input that fails trigger.manual.input_schema.
		schema := map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
		typed := u.workflow("typed", wfDef(wfBlocks(wfTrigger(schema))))
		for _, input := range []any{map[string]any{"n": "x"}, map[string]any{}} {
			r = u.c.post("/api/workflows/"+typed+"/run", map[string]any{"input": input})
			requireError(t, r, http.StatusBadRequest, "invalid_body")
			require.NotEmpty(t, arr(t, r.Body["issues"]), r.Raw)
		}
		id := u.startRun(typed, map[string]any{"input": map[string]any{"n": 3}})
		require.Equal(t, map[string]any{"n": float64(3)}, u.waitStatus(id, "completed")["input"])

		// Neither refusal stored a run.
		r = u.c.get("/api/runs")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, []any{id}, runIDs(t, r))

		requireError(t, u.c.post("/api/workflows/wf_missing/run", nil), http.StatusNotFound, "not_found")
		requireError(t, u.c.get("/api/runs/run_missing"), http.StatusNotFound, "not_found")
	})

	// json.validate through the whole system: the editor takes its schema param (and refuses
	// one that refers outside itself), the run outputs where the value breaks it, and with
	// fail_on_invalid the run fails with code json_invalid.
	t.Run("JSONValidate", func(t *testing.T) {
		t.Parallel()
		u := newRunsUser(t, sys, "jsonvalidate")
		schema := map[string]any{"type": "object", "required": []any{"qty"},
			"properties": map[string]any{"qty": map[string]any{"type": "integer", "minimum": 1}}}
		check := func(failOnInvalid bool) string {
			return u.workflow(fmt.Sprintf("validate-%v", failOnInvalid), wfDef(wfBlocks(wfTrigger(nil),
				wfBlock("check", "json.validate", map[string]any{"schema": schema, "value": "{{ input }}", "fail_on_invalid": failOnInvalid})),
				wfEdge("start", "check")))
		}
		lenient, strict := check(false), check(true)

		ok := u.waitStatus(u.startRun(lenient, map[string]any{"input": map[string]any{"qty": 2}}), "completed")
		require.Equal(t, map[string]any{"check": map[string]any{"valid": true, "errors": []any{}}}, ok["output"])
		bad := u.waitStatus(u.startRun(lenient, map[string]any{"input": map[string]any{"qty": 0}}), "completed")
		out := obj(t, obj(t, bad["output"])["check"])
		require.Equal(t, false, out["valid"])
		require.Equal(t, "/qty", obj(t, arr(t, out["errors"])[0])["path"])

		failed := u.startRun(strict, map[string]any{"input": map[string]any{}})
		u.waitStatus(failed, "failed")
		byBlock := attemptsByBlock(u.logs(failed))
		require.Len(t, byBlock["check"], 1, "a value that does not match is not retried")
		require.Equal(t, "json_invalid", obj(t, byBlock["check"][0]["error"])["code"])

		r := u.c.post("/api/workflows", map[string]any{"name": "outside", "definition": wfDef(wfBlocks(wfTrigger(nil),
			wfBlock("check", "json.validate", map[string]any{"schema": map[string]any{"$ref": "https://example.com/s.json"}, "value": 1})))})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		skipped := arr(t, r.Body["skipped_items"])
		require.Len(t, skipped, 1, r.Raw)
		require.Equal(t, "invalid_param", obj(t, skipped[0])["reason_code"], r.Raw)
	})
}

// runsUser is one signed-up user (its own organization) driving runs through the gateway.
type runsUser struct {
	t   *testing.T
	sys *harness.System
	c   *client
}

func newRunsUser(t *testing.T, sys *harness.System, prefix string) *runsUser {
	t.Helper()
	return &runsUser{t: t, sys: sys, c: signUp(t, sys, prefix).c}
}

// byAPIKey returns the same organization speaking through a fresh API key instead of the session.
func (u *runsUser) byAPIKey() *runsUser {
	u.t.Helper()
	r := u.c.post("/api/auth/api-key/create", map[string]any{"name": "runs"})
	require.Equal(u.t, http.StatusOK, r.Status, r.Raw)
	key, _ := r.Body["key"].(string)
	require.NotEmpty(u.t, key, r.Raw)
	return &runsUser{t: u.t, sys: u.sys, c: newClient(u.t, u.sys).with(func(c *client) { c.apiKey = key })}
}

// workflow creates a workflow from def and returns its id; it must have no validation errors,
// or, when codes are given, at least those.
func (u *runsUser) workflow(name string, def map[string]any, wantErrors ...string) string {
	u.t.Helper()
	r := u.c.post("/api/workflows", map[string]any{"name": name, "definition": def})
	require.Equal(u.t, http.StatusCreated, r.Status, r.Raw)
	require.Empty(u.t, r.Body["skipped_items"], r.Raw)
	var codes []string
	for _, e := range arr(u.t, r.Body["validation_errors"]) {
		codes = append(codes, obj(u.t, e)["code"].(string))
	}
	if len(wantErrors) == 0 {
		require.Empty(u.t, codes, r.Raw)
	}
	require.Subset(u.t, codes, wantErrors, r.Raw)
	id, _ := r.Body["id"].(string)
	require.Regexp(u.t, `^wf_`, id)
	return id
}

// startRun dispatches a run (hdr: header name, value pairs) and returns its id.
func (u *runsUser) startRun(wf string, body any, hdr ...string) string {
	u.t.Helper()
	c := u.c
	if len(hdr) > 0 {
		c = c.with(func(c *client) {
			c.headers = map[string]string{}
			for i := 0; i+1 < len(hdr); i += 2 {
				c.headers[hdr[i]] = hdr[i+1]
			}
		})
	}
	r := c.post("/api/workflows/"+wf+"/run", body)
	require.Equal(u.t, http.StatusAccepted, r.Status, r.Raw)
	require.Equal(u.t, "svc-runtime", r.Body["spec"], r.Raw)
	id, _ := r.Body["runId"].(string)
	require.Regexp(u.t, `^run_`, id)
	return id
}

func (u *runsUser) run(id string) map[string]any {
	u.t.Helper()
	r := u.c.get("/api/runs/" + id)
	require.Equal(u.t, http.StatusOK, r.Status, r.Raw)
	return r.Body
}

// pollRun reads the run until done accepts it (15 s at most) and returns that reading.
func (u *runsUser) pollRun(id, what string, done func(run map[string]any) bool) map[string]any {
	u.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := u.run(id)
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("run %s: not %s within 15 s; last: %v", id, what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus polls the run until it has status; a different terminal status fails at once.
func (u *runsUser) waitStatus(id, status string) map[string]any {
	u.t.Helper()
	return u.pollRun(id, status, func(run map[string]any) bool {
		s := run["status"]
		if s != status && (s == "completed" || s == "failed" || s == "cancelled") {
			u.t.Fatalf("run %s ended %s, want %s: %v", id, s, status, run)
		}
		return s == status
	})
}

func waitingAt(blockID, kind string) func(map[string]any) bool {
	return func(run map[string]any) bool {
		w, _ := run["waiting"].(map[string]any)
		return run["status"] == "waiting" && w["block_id"] == blockID && w["kind"] == kind
	}
}

// logs pages through the run's attempts two at a time until a page brings nothing.
func (u *runsUser) logs(id string) []map[string]any {
	u.t.Helper()
	var out []map[string]any
	cursor := ""
	for page := 0; page < 100; page++ {
		r := u.c.get("/api/runs/" + id + "/logs?limit=2" + afterQuery(cursor))
		require.Equal(u.t, http.StatusOK, r.Status, r.Raw)
		items := objs(u.t, r.Body["items"])
		if len(items) == 0 {
			return out
		}
		out = append(out, items...)
		next, _ := r.Body["nextCursor"].(string)
		require.NotEmpty(u.t, next, r.Raw)
		cursor = next
	}
	u.t.Fatalf("run %s: logs paging does not end", id)
	return nil
}

func afterQuery(cursor string) string {
	if cursor == "" {
		return ""
	}
	return "&after=" + url.QueryEscape(cursor)
}

// attempts is "block#attempt:status" per attempt.
func attempts(logs []map[string]any) []string {
	out := make([]string, 0, len(logs))
	for _, a := range logs {
		n, _ := a["attempt"].(float64)
		out = append(out, a["block_id"].(string)+"#"+strconv.Itoa(int(n))+":"+a["status"].(string))
	}
	return out
}

func attemptsByBlock(logs []map[string]any) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, a := range logs {
		out[a["block_id"].(string)] = append(out[a["block_id"].(string)], a)
	}
	return out
}

func objs(t *testing.T, v any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, it := range arr(t, v) {
		out = append(out, obj(t, it))
	}
	return out
}

func runIDs(t *testing.T, r response) []any {
	t.Helper()
	out := []any{}
	for _, it := range arr(t, r.Body["items"]) {
		out = append(out, obj(t, it)["runId"])
	}
	return out
}

// stamp parses a contract timestamp (RFC 3339 UTC, exactly 3 fractional digits).
func stamp(t *testing.T, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "want a timestamp, got %T: %v", v, v)
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, s)
	p, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return p
}

func wfDef(blocks []any, edges ...any) map[string]any {
	if edges == nil {
		edges = []any{}
	}
	return map[string]any{"blocks": blocks, "edges": edges}
}

func wfBlocks(b ...any) []any { return b }

func wfBlock(id, typ string, params map[string]any) map[string]any {
	return map[string]any{"block_id": id, "type": typ, "params": params}
}

func wfTrigger(inputSchema map[string]any) map[string]any {
	params := map[string]any{}
	if inputSchema != nil {
		params["input_schema"] = inputSchema
	}
	return wfBlock("start", "trigger.manual", params)
}

func wfEdge(from, to string) map[string]any {
	return map[string]any{"block_id": from, "target_block_id": to}
}

func wfBranch(from, to, b string) map[string]any {
	return map[string]any{"block_id": from, "target_block_id": to, "branch": b}
}
