package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
)

// The secrets of the two shipped routes in this test. The Standard Webhooks key is the one of
// the specification's example; the test signs with its own HMAC code, not the service's.
const (
	whGitHubSecret   = "gh-e2e-secret"
	whStandardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// TestWebhooks walks the webhook routes through the gateway: webhook-ingress first starts with
// no route configured (both disabled, and it says so), then is restarted with both shipped
// routes pointed, by slug, at an organization and workflows this test created. Deliveries are
// signed the way GitHub and Standard Webhooks senders sign them.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"})

	// Unconfigured: both routes are disabled, the log says which setting is missing, and their
	// paths are unknown.
	out := sys.Output(harness.Webhook)
	require.Contains(t, out, "webhook route disabled")
	require.Contains(t, out, "SVC_WEBHOOK_GITHUB_SECRET")
	require.Contains(t, out, "SVC_WEBHOOK_STANDARD_SECRET")
	requireError(t, deliverStandard(t, sys, "billing", "msg_off", time.Now(), `{"type":"x"}`), http.StatusNotFound, "not_found")

	u := newRunsUser(t, sys, "webhooks")
	org, _ := obj(t, u.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"].(string)
	require.Regexp(t, `^org_`, org)
	// Routes name their organization by slug; webhook-ingress asks identity for
	// its id.
	slug := orgSlug(t, u.c, org)
	eventsWF := u.workflow("on-event", wfDef(
		wfBlocks(wfBlock("start", "trigger.webhook", map[string]any{}),
			wfBlock("say", "log", map[string]any{"message": "{{ input.source }}"})),
		wfEdge("start", "say")))

	// Restart webhook-ingress with both routes configured. The GitHub route names a workflow
	// that does not exist yet: it is looked up per delivery, so it works once created.
	first := sys.Processes(harness.Webhook)
	require.Len(t, first, 1)
	first[0].Stop(t)
	sys.Run(t, harness.Webhook, map[string]string{
		"SVC_WEBHOOK_GITHUB_SECRET": whGitHubSecret, "SVC_WEBHOOK_GITHUB_ORG": slug, "SVC_WEBHOOK_GITHUB_WORKFLOW": "on-push",
		"SVC_WEBHOOK_STANDARD_SECRET": whStandardSecret, "SVC_WEBHOOK_STANDARD_ORG": slug, "SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
	})
	require.Contains(t, sys.Processes(harness.Webhook)[1].Output(), "webhook route enabled")

	// The Redis of this system, for the flush below.
	rdb, err := redisx.Open(testkit.RedisURL(t), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	scanKeys := func(pattern string) []string {
		t.Helper()
		var keys []string
		iter := rdb.Scan(harness.Context(t), 0, pattern, 1000).Iterator()
		for iter.Next(harness.Context(t)) {
			keys = append(keys, iter.Val())
		}
		require.NoError(t, iter.Err())
		return keys
	}
	// The harness leaves the system's Redis keys behind; the idempotency keys live 24 h.
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, sys.RedisPrefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})

	t.Run("StandardWebhooksRun", func(t *testing.T) {
		r := deliverStandard(t, sys, "billing", "msg_one", time.Now(), `{"type":"invoice.paid","data":{"id":7}}`)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Len(t, r.Body, 1, "exactly {workflowRunId}: %s", r.Raw)
		id, _ := r.Body["workflowRunId"].(string)
		require.Regexp(t, `^run_`, id)

		got := u.waitStatus(id, "completed")
		require.Equal(t, eventsWF, got["workflowId"])
		require.Equal(t, map[string]any{"source": "billing", "event": map[string]any{"type": "invoice.paid", "data": map[string]any{"id": float64(7)}}}, got["input"])
		require.Equal(t, map[string]any{"kind": "webhook", "route": "POST /events/:source", "path": "/api/webhooks/events/billing", "idempotencyKey": "msg_one"},
			got["trigger"])

		// A redelivery (new timestamp, new signature, same webhook-id) answers the same run.
		again := deliverStandard(t, sys, "billing", "msg_one", time.Now().Add(-time.Minute), `{"type":"invoice.paid","data":{"id":7}}`)
		require.Equal(t, http.StatusAccepted, again.Status, again.Raw)
		require.Equal(t, id, again.Body["workflowRunId"])
	})

	t.Run("GitHubRunsOnceItsWorkflowExists", func(t *testing.T) {
		body := `{"zen":"Design for failure.","hook_id":42}`
		r := deliverGitHub(t, sys, "ping", "gh-delivery-1", body, "")
		requireError(t, r, http.StatusNotFound, "workflow_not_found")

		pushWF := u.workflow("on-push", wfDef(wfBlocks(wfBlock("start", "trigger.webhook", map[string]any{}))))
		r = deliverGitHub(t, sys, "ping", "gh-delivery-1", body, "")
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		id, _ := r.Body["workflowRunId"].(string)
		got := u.waitStatus(id, "completed")
		require.Equal(t, pushWF, got["workflowId"])
		require.Equal(t, map[string]any{"event": "ping", "delivery": "gh-delivery-1", "payload": map[string]any{"zen": "Design for failure.", "hook_id": float64(42)}}, got["input"])
		require.Equal(t, "webhook", obj(t, got["trigger"])["kind"])

		// Keys are per route: the same value as a Standard Webhooks id starts another run.
		other := deliverStandard(t, sys, "github", "gh-delivery-1", time.Now(), body)
		require.Equal(t, http.StatusAccepted, other.Status, other.Raw)
		require.NotEqual(t, id, other.Body["workflowRunId"])
	})

	// A route configured before its organization exists: 404 workflow_not_found until the
	// organization and its workflow are created, then runs, without a restart (the organization
	// is looked up per delivery and a not-found answer is never cached). The route runs in a
	// second webhook-ingress of this system, on its own address and delivered to directly (the
	// gateway forwards /api/webhooks/ as it is, to the first one).
	t.Run("ARouteRunsOnceItsOrganizationExists", func(t *testing.T) {
		lateSlug := "late-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		addr := listenAddr(t)
		late := sys.Run(t, harness.Webhook, map[string]string{
			"SVC_WEBHOOK_ADDR":            addr,
			"SVC_WEBHOOK_STANDARD_SECRET": whStandardSecret, "SVC_WEBHOOK_STANDARD_ORG": lateSlug, "SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
		})
		// A slug of no organization is not refused at start-up.
		require.Eventually(t, func() bool { return strings.Contains(late.Output(), "webhook route enabled") }, 10*time.Second, 20*time.Millisecond)
		deliver := func() response {
			t.Helper()
			body := `{"type":"late"}`
			return call(t, http.MethodPost, "http://"+addr+"/api/webhooks/events/late", strings.NewReader(body),
				append([]string{"Content-Type", "application/json"}, standardHeaders("msg_late", time.Now(), body, whStandardSecret)...)...)
		}
		requireError(t, deliver(), http.StatusNotFound, "workflow_not_found")
		requireError(t, deliver(), http.StatusNotFound, "workflow_not_found")

		// The organization is created: the very next delivery finds it (no negative cache), and
		// the orchestrator finds no workflow in it yet.
		v := newRunsUser(t, sys, "webhooks-late")
		created := v.c.post("/api/auth/organization/create", map[string]any{"name": "Late", "slug": lateSlug})
		require.Equal(t, http.StatusOK, created.Status, created.Raw)
		lateOrg, _ := created.Body["id"].(string)
		require.Regexp(t, `^org_`, lateOrg)
		require.Equal(t, lateOrg, obj(t, v.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"])
		requireError(t, deliver(), http.StatusNotFound, "workflow_not_found")

		// And its workflow: the same delivery, retried, runs there.
		lateWF := v.workflow("on-event", wfDef(wfBlocks(wfBlock("start", "trigger.webhook", map[string]any{}))))
		r := deliver()
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		id, _ := r.Body["workflowRunId"].(string)
		got := v.waitStatus(id, "completed")
		require.Equal(t, lateWF, got["workflowId"])
		require.Equal(t, map[string]any{"source": "late", "event": map[string]any{"type": "late"}}, got["input"])
		require.Equal(t, http.StatusNotFound, u.c.get("/api/runs/"+id).Status, "the run is in the new organization, not the first one")
		again := deliver()
		require.Equal(t, http.StatusAccepted, again.Status, again.Raw)
		require.Equal(t, id, again.Body["workflowRunId"])

		late.Stop(t)
	})

	// Identity unreachable: a route named by slug answers 503 unavailable (never a 404, and
	// nothing starts); a route named by organization id needs no lookup and runs. The process
	// is a third webhook-ingress of this system whose identity address refuses connections, so
	// the rest of the system keeps its identity.
	t.Run("IdentityUnreachable", func(t *testing.T) {
		addr := listenAddr(t)
		p := sys.Run(t, harness.Webhook, map[string]string{
			"SVC_WEBHOOK_ADDR": addr, "SVC_IDENTITY_URL": "http://" + listenAddr(t),
			"SVC_WEBHOOK_GITHUB_SECRET": whGitHubSecret, "SVC_WEBHOOK_GITHUB_ORG": org, "SVC_WEBHOOK_GITHUB_WORKFLOW": "on-push",
			"SVC_WEBHOOK_STANDARD_SECRET": whStandardSecret, "SVC_WEBHOOK_STANDARD_ORG": slug, "SVC_WEBHOOK_STANDARD_WORKFLOW": "on-event",
		})
		body := `{"type":"identity-down"}`
		r := call(t, http.MethodPost, "http://"+addr+"/api/webhooks/events/billing", strings.NewReader(body),
			append([]string{"Content-Type", "application/json"}, standardHeaders("msg_identity_down", time.Now(), body, whStandardSecret)...)...)
		requireError(t, r, http.StatusServiceUnavailable, "unavailable")
		// The log says which peer (the process's output is copied from a pipe, so it may lag).
		require.Eventually(t, func() bool { return strings.Contains(p.Output(), "identity unavailable") }, 10*time.Second, 20*time.Millisecond)

		gh := `{"zen":"Keep it logically awesome."}`
		r = call(t, http.MethodPost, "http://"+addr+"/api/webhooks/github", strings.NewReader(gh),
			"Content-Type", "application/json", "X-GitHub-Event", "ping", "X-GitHub-Delivery", "gh-by-id", "X-Hub-Signature-256", githubSignature([]byte(gh)))
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		got := u.waitStatus(r.Body["workflowRunId"].(string), "completed")
		require.Equal(t, "gh-by-id", obj(t, got["input"])["delivery"])
		p.Stop(t)
	})

	t.Run("Rejections", func(t *testing.T) {
		now := time.Now()
		good := `{"type":"ping"}`
		for _, tc := range []struct {
			name   string
			r      response
			status int
			code   string
		}{
			{"GitHubBadSignature", deliverGitHub(t, sys, "ping", "gh-bad", good, "sha256="+strings.Repeat("0", 64)), http.StatusUnauthorized, "invalid_signature"},
			{"GitHubMalformedSignature", deliverGitHub(t, sys, "ping", "gh-bad", good, "sha1=abc"), http.StatusUnauthorized, "invalid_signature"},
			{"StandardWrongSecret", send(t, sys, "/api/webhooks/events/billing", "application/json", good,
				standardHeaders("msg_bad", now, good, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes!!!!!")))...), http.StatusUnauthorized, "invalid_signature"},
			{"StandardMissingHeaders", send(t, sys, "/api/webhooks/events/billing", "application/json", good), http.StatusUnauthorized, "invalid_signature"},
			{"StaleTimestamp", deliverStandard(t, sys, "billing", "msg_stale", now.Add(-6*time.Minute), good), http.StatusUnauthorized, "invalid_signature"},
			{"FutureTimestamp", deliverStandard(t, sys, "billing", "msg_future", now.Add(6*time.Minute), good), http.StatusUnauthorized, "invalid_signature"},
			{"NumberOutOfRange", deliverStandard(t, sys, "billing", "msg_1e309", now, `{"n":1e309}`), http.StatusBadRequest, "invalid_body"},
			{"IntegerTooLong", deliverStandard(t, sys, "billing", "msg_bigint", now, `{"n":123456789012345678901234567890}`), http.StatusBadRequest, "invalid_body"},
			{"DuplicateMember", deliverStandard(t, sys, "billing", "msg_dup", now, `{"type":"a","type":"b"}`), http.StatusBadRequest, "invalid_body"},
			{"GitHubNoDelivery", send(t, sys, "/api/webhooks/github", "application/json", good,
				"X-GitHub-Event", "ping", "X-Hub-Signature-256", githubSignature([]byte(good))), http.StatusBadRequest, "webhook_rejected"},
			{"SchemaMismatch", deliverStandard(t, sys, "billing", "msg_array", now, `[1,2,3]`), http.StatusBadRequest, "invalid_body"},
			{"SchemaMismatchInParam", deliverStandard(t, sys, "bad~source", "msg_param", now, good), http.StatusBadRequest, "invalid_body"},
			{"NotJSON", deliverStandard(t, sys, "billing", "msg_notjson", now, `{"type":`), http.StatusBadRequest, "invalid_body"},
			{"UnknownPath", deliverStandard(t, sys, "billing/more", "msg_path", now, good), http.StatusNotFound, "not_found"},
			{"UnknownRoute", send(t, sys, "/api/webhooks/gitlab", "application/json", good), http.StatusNotFound, "not_found"},
			{"WrongMethod", call(t, http.MethodGet, sys.BaseURL+"/api/webhooks/github", nil), http.StatusMethodNotAllowed, "method_not_allowed"},
			{"TooLarge", send(t, sys, "/api/webhooks/github", "application/json", `{"x":"`+strings.Repeat("a", 1<<20)+`"}`), http.StatusRequestEntityTooLarge, "payload_too_large"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				requireError(t, tc.r, tc.status, tc.code)
				if tc.code == "invalid_body" {
					require.NotEmpty(t, arr(t, tc.r.Body["issues"]), tc.r.Raw)
				}
				if tc.code == "webhook_rejected" || tc.code == "invalid_signature" {
					require.NotEmpty(t, tc.r.Body["message"], tc.r.Raw)
				}
			})
		}
		// None of them started a run: on-event has only the runs of the two subtests before.
		require.Len(t, runsOf(t, u, eventsWF), 2, "msg_one and the Standard Webhooks delivery keyed gh-delivery-1")
	})

	// Issue 12, defect 4: a body is parsed only when it is application/json; any other
	// body is the empty object and the delivery still dispatches, its signature checked over
	// the raw bytes.
	// A signed body of exactly 1 MiB is within the limit: its run input (the body wrapped in
	// {source, event}) is a little larger, and still starts a run (it was a 503, retried
	// forever by a sender: the orchestrator's internal API had the public 1 MiB limit).
	t.Run("BodyOfExactlyOneMiB", func(t *testing.T) {
		body := `{"x":"` + strings.Repeat("a", 1<<20-8) + `"}`
		require.Len(t, body, 1<<20)
		r := deliverStandard(t, sys, "billing", "msg_one_mib", time.Now(), body)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw[:min(len(r.Raw), 300)])
		got := u.waitStatus(r.Body["workflowRunId"].(string), "completed")
		require.Len(t, obj(t, obj(t, got["input"])["event"])["x"], 1<<20-8)
	})

	t.Run("NonJSONBodiesAreTheEmptyObject", func(t *testing.T) {
		now := time.Now()
		text := "plain text, not JSON"
		r := send(t, sys, "/api/webhooks/events/billing", "text/plain", text, standardHeaders("msg_text", now, text, whStandardSecret)...)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		got := u.waitStatus(r.Body["workflowRunId"].(string), "completed")
		require.Equal(t, map[string]any{"source": "billing", "event": map[string]any{}}, got["input"])
		// The same bytes under a signature of other bytes: refused.
		r = send(t, sys, "/api/webhooks/events/billing", "text/plain", text+"!", standardHeaders("msg_text2", now, text, whStandardSecret)...)
		requireError(t, r, http.StatusUnauthorized, "invalid_signature")

		form := "payload=%7B%7D"
		r = send(t, sys, "/api/webhooks/github", "application/x-www-form-urlencoded", form,
			"X-GitHub-Event", "ping", "X-GitHub-Delivery", "gh-form", "X-Hub-Signature-256", githubSignature([]byte(form)))
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		got = u.waitStatus(r.Body["workflowRunId"].(string), "completed")
		require.Equal(t, map[string]any{"event": "ping", "delivery": "gh-form", "payload": map[string]any{}}, got["input"])
	})

	t.Run("ExactlyOnceUnderConcurrentRedeliveryAndAfterFlush", func(t *testing.T) {
		before := len(runsOf(t, u, eventsWF))
		const keys, perKey, concurrency = 200, 10, 32
		tag := strconv.FormatInt(time.Now().UnixNano(), 36)
		keyOf := func(i int) string { return fmt.Sprintf("msg_%s_%03d", tag, i) }

		first := deliverAll(t, sys, keys, perKey, concurrency, keyOf)
		require.Len(t, first, keys)
		ids := map[string]bool{}
		for _, id := range first {
			ids[id] = true
		}
		require.Len(t, ids, keys, "one distinct run per key")
		runs := runsOf(t, u, eventsWF)
		require.Len(t, runs, before+keys, "exactly one run per key")
		for id := range ids {
			require.Contains(t, runs, id)
		}

		// The fast path is in use: the keys are in Redis under the system's prefix.
		require.GreaterOrEqual(t, len(scanKeys(sys.RedisPrefix+"webhook:idem:*")), keys)

		// FLUSHALL, for this system: the Redis is shared with other tests running at the same
		// time, so flushing it would break them. Deleting every key under the system's own prefix
		// (each service of this system, and nothing else, writes there) leaves this system with
		// exactly the Redis a FLUSHALL would: empty.
		for _, k := range scanKeys(sys.RedisPrefix + "*") {
			require.NoError(t, rdb.Del(harness.Context(t), k).Err())
		}
		require.Empty(t, scanKeys(sys.RedisPrefix+"*"))

		again := deliverAll(t, sys, keys, perKey, concurrency, keyOf)
		require.Equal(t, first, again, "after the flush every key answers its first run")
		require.Len(t, runsOf(t, u, eventsWF), before+keys, "and no second run was started")
	})

	t.Run("OrchestratorDown", func(t *testing.T) {
		orch := sys.Processes(harness.Orchestrator)
		require.Len(t, orch, 1)
		orch[0].Stop(t)
		r := deliverStandard(t, sys, "billing", "msg_outage", time.Now(), `{"type":"outage"}`)
		requireError(t, r, http.StatusServiceUnavailable, "unavailable")
		require.NotEmpty(t, r.Body["message"])

		sys.Run(t, harness.Orchestrator, nil)
		// The breaker may still be open for a few seconds: redeliver until it closes, as a
		// sender retrying a 503 does.
		deadline := time.Now().Add(30 * time.Second)
		for {
			r = deliverStandard(t, sys, "billing", "msg_outage", time.Now(), `{"type":"outage"}`)
			if r.Status == http.StatusAccepted || time.Now().After(deadline) {
				break
			}
			require.Equal(t, http.StatusServiceUnavailable, r.Status, r.Raw)
			time.Sleep(100 * time.Millisecond)
		}
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		u.waitStatus(r.Body["workflowRunId"].(string), "completed")
	})
}

// deliverAll sends perKey signed deliveries of each of keys ids with concurrency senders. The
// copies of one key are queued next to each other, so they are in flight together. It checks
// that every answer is 202 and that all answers for a key name one run, and returns key → run.
func deliverAll(t *testing.T, sys *harness.System, keys, perKey, concurrency int, keyOf func(int) string) map[string]string {
	t.Helper()
	order := rand.Perm(keys)
	jobs := make(chan int, keys*perKey)
	for _, k := range order {
		for range perKey {
			jobs <- k
		}
	}
	close(jobs)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	t.Cleanup(client.CloseIdleConnections)
	var (
		mu      sync.Mutex
		answers = map[string]map[string]int{}
		failure error
		wg      sync.WaitGroup
	)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range jobs {
				key := keyOf(k)
				body := fmt.Sprintf(`{"type":"load","data":{"n":%d}}`, k)
				status, id, raw, err := post(client, sys.BaseURL+"/api/webhooks/events/load", body, standardHeaders(key, time.Now(), body, whStandardSecret))
				mu.Lock()
				switch {
				case err != nil && failure == nil:
					failure = err
				case err == nil && status != http.StatusAccepted && failure == nil:
					failure = fmt.Errorf("%s: %d %s", key, status, raw)
				case err == nil && status == http.StatusAccepted:
					if answers[key] == nil {
						answers[key] = map[string]int{}
					}
					answers[key][id]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, failure)
	out := map[string]string{}
	for key, ids := range answers {
		require.Len(t, ids, 1, "key %s answered several runs: %v", key, ids)
		for id, n := range ids {
			require.Equal(t, perKey, n)
			require.Regexp(t, `^run_`, id)
			out[key] = id
		}
	}
	return out
}

func post(c *http.Client, url, body string, hdr []string) (int, string, string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", err
	}
	var b struct {
		WorkflowRunID string `json:"workflowRunId"`
	}
	_ = json.Unmarshal(raw, &b)
	return resp.StatusCode, b.WorkflowRunID, string(raw), nil
}

// orgSlug returns the slug of organization id, from the caller's organization list.
func orgSlug(t *testing.T, c *client, id string) string {
	t.Helper()
	r := c.get("/api/auth/organization/list")
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	for _, o := range arr(t, decodeAny(t, r.Raw)) {
		if m := obj(t, o); m["id"] == id {
			slug, _ := m["slug"].(string)
			require.NotEmpty(t, slug, r.Raw)
			return slug
		}
	}
	t.Fatalf("organization %s is not in the caller's list: %s", id, r.Raw)
	return ""
}

// send posts body to path through the gateway with contentType and header pairs.
func send(t *testing.T, sys *harness.System, path, contentType, body string, hdr ...string) response {
	t.Helper()
	return call(t, http.MethodPost, sys.BaseURL+path, bytes.NewReader([]byte(body)), append([]string{"Content-Type", contentType}, hdr...)...)
}

func deliverStandard(t *testing.T, sys *harness.System, source, id string, at time.Time, body string) response {
	t.Helper()
	return send(t, sys, "/api/webhooks/events/"+source, "application/json", body, standardHeaders(id, at, body, whStandardSecret)...)
}

// deliverGitHub posts a GitHub delivery, signed correctly unless sig is given.
func deliverGitHub(t *testing.T, sys *harness.System, event, delivery, body, sig string) response {
	t.Helper()
	if sig == "" {
		sig = githubSignature([]byte(body))
	}
	return send(t, sys, "/api/webhooks/github", "application/json", body,
		"X-GitHub-Event", event, "X-GitHub-Delivery", delivery, "X-Hub-Signature-256", sig)
}

func githubSignature(body []byte) string {
	m := hmac.New(sha256.New, []byte(whGitHubSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// standardHeaders signs a delivery as a Standard Webhooks sender does.
func standardHeaders(id string, at time.Time, body, secret string) []string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + body))
	return []string{"webhook-id", id, "webhook-timestamp", ts,
		"webhook-signature", "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}
}

// runsOf lists the ids of every run of a workflow, paging to the end.
func runsOf(t *testing.T, u *runsUser, wf string) []string {
	t.Helper()
	var out []string
	cursor := ""
	for range 100 {
		r := u.c.get("/api/runs?workflowId=" + wf + "&limit=500" + afterQuery(cursor))
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		for _, it := range arr(t, r.Body["items"]) {
			out = append(out, obj(t, it)["runId"].(string))
		}
		next, _ := r.Body["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
	t.Fatalf("runs of %s: paging does not end", wf)
	return nil
}
