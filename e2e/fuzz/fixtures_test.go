package fuzz

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc.dev/e2e/harness"
	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
)

// The webhook routes' secrets; deliveries are signed with them by the test's own code.
const (
	ghSecret       = "gh-fuzz-secret"
	stdSecret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	hookWorkflow   = "fuzz-hook"
	password       = "correct horse battery"
	throwawayFloor = 6 // throwaway resources kept ready for the rejected-only phase
)

// fixtures are the resources the generators point at: real ids of this system.
type fixtures struct {
	mu sync.Mutex

	orgID, orgSlug   string // the main organization (also the webhook routes')
	token, signed    string // main user's session: raw token and signed cookie value
	key              string // an API key of the main organization
	revokedKey       string // a revoked one
	u2Token, u2Email string // another organization's owner: the auth-layer playground
	u2Orgs           []string
	u2Slugs          []string
	u3Email, u3Token string // the password-change and sign-in user (password never changes)

	foreignWF, foreignRun, foreignSchedule, foreignKey string // ids of u2's organization

	runnable  []string // workflows never edited: trigger.manual → log, and → wait for a signal
	waitWF    string
	invalidWF string
	hookWF    string
	editable  []string // workflows the fuzzer patches
	runs      []string
	waiting   []string // runs waiting for signal "go"
	schedules []string
	invites   []string
	keyIDs    []string          // main organization's key ids (not the fuzzer's credential)
	cursors   map[string]string // operationId → a cursor that list issued

	// Throwaways for DELETE and the like, consumed by the rejected-only phase.
	trashWF, trashSchedule, trashKey []string
}

func (x *fixtures) pick(r interface{ IntN(int) int }, list []string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(list) == 0 {
		return "missing_" + strconv.Itoa(r.IntN(1000))
	}
	return list[r.IntN(len(list))]
}

func (x *fixtures) add(list *[]string, v string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	*list = append(*list, v)
	if len(*list) > 400 {
		*list = (*list)[len(*list)-400:]
	}
}

func (x *fixtures) take(list *[]string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(*list) == 0 {
		return "", false
	}
	v := (*list)[0]
	*list = (*list)[1:]
	return v, true
}

func (x *fixtures) count(list *[]string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(*list)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setup starts the system with both webhook routes pointed at the main organization (named by
// a slug chosen here, created below: routes find their organization per delivery), a rate
// limit too large to matter (rateLimitShape checks 429s on a gateway of its own), no
// self-ticking scheduler (ticks happen when the fuzzer asks), and the bootstrap open.
func setup(t *testing.T, seed uint64) *fuzzer {
	t.Helper()
	sp, err := loadSpec()
	if err != nil {
		t.Fatalf("fuzz: %v", err)
	}
	slug := "fuzz-" + randHex(4)
	env := map[string]string{
		"SVC_TRUSTED_ORIGINS":         testOrigin,
		"SVC_MAIL":                    "log",
		"SVC_RATE_LIMIT_PER_MINUTE":   "1000000",
		"SVC_SCHEDULER_TICK":          "0",
		"SVC_BOOTSTRAP":               "1",
		"SVC_LOG_LEVEL":               "warn",
		"SVC_WEBHOOK_GITHUB_SECRET":   ghSecret,
		"SVC_WEBHOOK_GITHUB_ORG":      slug,
		"SVC_WEBHOOK_GITHUB_WORKFLOW": hookWorkflow,
		"SVC_WEBHOOK_STANDARD_SECRET": stdSecret, "SVC_WEBHOOK_STANDARD_ORG": slug, "SVC_WEBHOOK_STANDARD_WORKFLOW": hookWorkflow,
	}
	// The harness leaves the system's Redis keys behind (idempotency records live 24 h):
	// every key under its prefix is deleted when the test ends. Registered before the
	// harness's own cleanups, so it runs after them, once the services have stopped.
	rdb, err := redisx.Open(testkit.RedisURL(t), nil, nil)
	if err != nil {
		t.Fatalf("fuzz: redis: %v", err)
	}
	var prefix string
	t.Cleanup(func() {
		ctx := context.Background()
		if prefix != "" {
			iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				rdb.Del(ctx, iter.Val())
			}
		}
		_ = rdb.Close()
	})
	sys := harness.Start(t, harness.Options{Env: env})
	prefix = sys.RedisPrefix
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * workers, DisableCompression: true, Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	probe, err := newStateProbe(ctx, sys.DatabaseURL)
	if err != nil {
		t.Fatalf("fuzz: state probe: %v", err)
	}
	t.Cleanup(probe.pool.Close)
	f := &fuzzer{
		t: t, ctx: ctx, sys: sys, spec: sp, seed: seed, probe: probe,
		client:   &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		stats:    map[string]map[string]int{},
		byKind:   map[string]int{},
		opsSeen:  map[string]bool{},
		failures: map[string][]failure{},
		nFail:    map[string]int{},
		fx:       &fixtures{orgSlug: slug, cursors: map[string]string{}},
		muts:     mutations(),
		trace:    os.Getenv("SVC_FUZZ_TRACE") == "1",
	}
	f.makeFixtures()
	t.Logf("fuzz: %d operations in the document, %d tables fingerprinted", len(sp.Ops), len(probe.names))
	return f
}

// api sends one setup request (checked and counted like any other) and decodes its JSON.
func (f *fuzzer) api(method, path string, cred func(http.Header), body any, want int) (map[string]any, *result) {
	f.t.Helper()
	req := &request{Kind: "setup", Method: method, Path: path, Header: http.Header{}}
	req.Op = f.opFor(method, path)
	if cred != nil {
		cred(req.Header)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			f.t.Fatal(err)
		}
		req.Body = b
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Origin", testOrigin)
	}
	res := f.send(req)
	if want != 0 && res.Status != want {
		f.t.Fatalf("fuzz setup: %s %s: want %d, got %d %s", method, path, want, res.Status, res.Body)
	}
	var m map[string]any
	_ = json.Unmarshal(res.Body, &m)
	return m, res
}

// opFor is the operation a concrete path and method belong to.
func (f *fuzzer) opFor(method, p string) *operation {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	for _, op := range f.spec.Ops {
		if op.Method == method && templateMatch(op.Path, p) {
			return op
		}
	}
	return nil
}

func bearer(tok string) func(http.Header) {
	return func(h http.Header) { h.Set("Authorization", "Bearer "+tok) }
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		cm, _ := cur.(map[string]any)
		cur = cm[p]
	}
	s, _ := cur.(string)
	return s
}

func def(blocks ...map[string]any) map[string]any {
	var edges []any
	for i := 1; i < len(blocks); i++ {
		edges = append(edges, map[string]any{"block_id": blocks[i-1]["block_id"], "target_block_id": blocks[i]["block_id"]})
	}
	bs := make([]any, len(blocks))
	for i, b := range blocks {
		bs[i] = b
	}
	if edges == nil {
		edges = []any{}
	}
	return map[string]any{"blocks": bs, "edges": edges}
}

func block(id, typ string, params map[string]any) map[string]any {
	return map[string]any{"block_id": id, "type": typ, "params": params}
}

func (f *fuzzer) makeFixtures() {
	x := f.fx
	u1 := "fz-owner-" + randHex(4) + "@example.com"
	boot, res := f.api(http.MethodPost, "/api/bootstrap", nil, map[string]any{"email": u1, "password": password, "name": "Fuzz Owner", "organizationName": "Fuzz Boot"}, http.StatusCreated)
	x.token = str(boot, "token")
	x.signed = res.Header.Get("Set-Auth-Token")
	own := bearer(x.token)
	org, _ := f.api(http.MethodPost, "/api/auth/organization/create", own, map[string]any{"name": "Fuzz", "slug": x.orgSlug}, http.StatusOK)
	x.orgID = str(org, "id")
	k, _ := f.api(http.MethodPost, "/api/auth/api-key/create", own, map[string]any{"name": "fuzz"}, http.StatusOK)
	x.key = str(k, "key")
	x.keyIDs = append(x.keyIDs, str(k, "id"))
	rk, _ := f.api(http.MethodPost, "/api/auth/api-key/create", own, map[string]any{"name": "revoked"}, http.StatusOK)
	x.revokedKey = str(rk, "key")
	f.api(http.MethodDelete, "/api/auth/api-key/"+str(rk, "id"), own, nil, http.StatusOK)

	// The other organization: its ids must be 404 to the main one.
	x.u2Email = "fz-other-" + randHex(4) + "@example.com"
	u2, _ := f.api(http.MethodPost, "/api/auth/sign-up/email", nil, map[string]any{"email": x.u2Email, "password": password, "name": "Other"}, http.StatusOK)
	x.u2Token = str(u2, "token")
	other := bearer(x.u2Token)
	sess, _ := f.api(http.MethodGet, "/api/auth/get-session", other, nil, http.StatusOK)
	x.u2Orgs = []string{str(sess, "session", "activeOrganizationId")}
	o2, _ := f.api(http.MethodPost, "/api/auth/organization/create", other, map[string]any{"name": "Other Two", "slug": "fz-other-" + randHex(3), "keepCurrentActiveOrganization": true}, http.StatusOK)
	x.u2Orgs = append(x.u2Orgs, str(o2, "id"))
	x.u2Slugs = append(x.u2Slugs, str(o2, "slug"))
	fw, _ := f.api(http.MethodPost, "/api/workflows", other, map[string]any{"name": "theirs", "definition": def(block("start", "trigger.manual", map[string]any{}), block("say", "log", map[string]any{"message": "x"}))}, http.StatusCreated)
	x.foreignWF = str(fw, "id")
	fr, _ := f.api(http.MethodPost, "/api/workflows/"+x.foreignWF+"/run", other, map[string]any{}, http.StatusAccepted)
	x.foreignRun = str(fr, "runId")
	fs, _ := f.api(http.MethodPost, "/api/schedules", other, map[string]any{"workflowId": x.foreignWF, "cron": "0 0 1 1 *"}, http.StatusCreated)
	x.foreignSchedule = str(fs, "id")
	fk, _ := f.api(http.MethodPost, "/api/auth/api-key/create", other, map[string]any{"name": "theirs"}, http.StatusOK)
	x.foreignKey = str(fk, "id")
	inv, _ := f.api(http.MethodPost, "/api/auth/organization/invite-member", other, map[string]any{"email": "fz-invitee@example.com", "role": "member"}, http.StatusOK)
	x.invites = append(x.invites, str(inv, "id"))

	x.u3Email = "fz-signin-" + randHex(4) + "@example.com"
	u3, _ := f.api(http.MethodPost, "/api/auth/sign-up/email", nil, map[string]any{"email": x.u3Email, "password": password, "name": "Signin"}, http.StatusOK)
	x.u3Token = str(u3, "token")

	// The main organization's workflows, runs, schedules.
	mk := func(name string, d map[string]any, want int) string {
		w, _ := f.api(http.MethodPost, "/api/workflows", own, map[string]any{"name": name, "definition": d}, want)
		return str(w, "id")
	}
	okWF := mk("fz-ok", def(block("start", "trigger.manual", map[string]any{}), block("say", "log", map[string]any{"message": "{{ input }}"})), http.StatusCreated)
	x.waitWF = mk("fz-wait", def(block("start", "trigger.manual", map[string]any{}), block("w", "wait", map[string]any{"signal": "go"})), http.StatusCreated)
	x.invalidWF = mk("fz-invalid", def(block("say", "log", map[string]any{"message": "no trigger"})), http.StatusCreated)
	x.hookWF = mk(hookWorkflow, def(block("start", "trigger.webhook", map[string]any{}), block("say", "log", map[string]any{"message": "hook"})), http.StatusCreated)
	x.runnable = []string{okWF, x.waitWF}
	for i := range 3 {
		x.editable = append(x.editable, mk(fmt.Sprintf("fz-edit-%d", i), def(block("start", "trigger.manual", map[string]any{}), block("say", "log", map[string]any{"message": "e"})), http.StatusCreated))
	}
	for range 2 {
		r, _ := f.api(http.MethodPost, "/api/workflows/"+okWF+"/run", own, map[string]any{"input": map[string]any{"n": 1}}, http.StatusAccepted)
		x.runs = append(x.runs, str(r, "runId"))
	}
	for range 3 {
		r, _ := f.api(http.MethodPost, "/api/workflows/"+x.waitWF+"/run", own, nil, http.StatusAccepted)
		x.runs = append(x.runs, str(r, "runId"))
		x.waiting = append(x.waiting, str(r, "runId"))
	}
	for _, c := range []string{"0 0 1 1 *", "@yearly"} {
		s, _ := f.api(http.MethodPost, "/api/schedules", own, map[string]any{"workflowId": okWF, "cron": c}, http.StatusCreated)
		x.schedules = append(x.schedules, str(s, "id"))
	}
	if _, err := f.settle(); err != nil {
		f.t.Fatalf("fuzz setup: %v", err)
	}
	// A cursor each list issued (every list here has at least two items).
	for id, p := range map[string]string{
		"listWorkflows":    "/api/workflows?limit=1",
		"listRuns":         "/api/runs?limit=1",
		"listWorkflowRuns": "/api/workflows/" + x.waitWF + "/runs?limit=1",
		"listSchedules":    "/api/schedules?limit=1",
		"getRunLogs":       "/api/runs/" + x.runs[0] + "/logs?limit=1",
	} {
		m, _ := f.api(http.MethodGet, p, own, nil, http.StatusOK)
		if c := str(m, "nextCursor"); c != "" {
			x.cursors[id] = c
		} else {
			f.t.Fatalf("fuzz setup: %s gave no cursor", p)
		}
	}
	// The probe must see what a request stores: inserts (the throwaways) and an update in
	// place (a rename changes no row count).
	s0, err := f.probe.snapshot(f.ctx)
	if err != nil {
		f.t.Fatalf("fuzz setup: %v", err)
	}
	f.refillTrash()
	s1, _ := f.probe.snapshot(f.ctx)
	f.api(http.MethodPatch, "/api/workflows/"+x.editable[0], own, map[string]any{"description": "renamed"}, http.StatusOK)
	s2, _ := f.probe.snapshot(f.ctx)
	for _, want := range []struct {
		a, b  snapshot
		table string
	}{{s0, s1, `"editor"."workflows"`}, {s0, s1, `"scheduler"."schedules"`}, {s0, s1, `"identity"."api_keys"`}, {s1, s2, `"editor"."workflows"`}} {
		if want.a[want.table] == want.b[want.table] {
			f.t.Fatalf("fuzz setup: the state probe did not see a change of %s (tables: %v)", want.table, f.probe.names)
		}
	}
}

// refillTrash makes sure the rejected-only phase has throwaway resources to aim DELETEs at
// (a DELETE that was accepted consumed its id). A failed creation is checked and reported
// like any request; the phase then aims at missing ids instead.
func (f *fuzzer) refillTrash() {
	x := f.fx
	own := bearer(x.token)
	for _, pool := range []struct {
		list *[]string
		make func() string
	}{
		{&x.trashWF, func() string {
			return str(f.try(http.MethodPost, "/api/workflows", own, map[string]any{"name": "fz-trash-" + randHex(5)}), "id")
		}},
		{&x.trashSchedule, func() string {
			return str(f.try(http.MethodPost, "/api/schedules", own, map[string]any{"workflowId": x.runnable[0], "cron": "0 0 1 1 *"}), "id")
		}},
		{&x.trashKey, func() string {
			return str(f.try(http.MethodPost, "/api/auth/api-key/create", own, map[string]any{"name": "trash"}), "id")
		}},
	} {
		for x.count(pool.list) < throwawayFloor {
			id := pool.make()
			if id == "" {
				break
			}
			x.add(pool.list, id)
		}
	}
}

// ---------------------------------------------------------------------------------------
// Webhook signing, as senders do.

func githubSig(body []byte) string {
	m := hmac.New(sha256.New, []byte(ghSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func standardSig(id, ts string, body []byte, secret string) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// sign puts valid signature headers on a webhook delivery for its (final) body.
func sign(req *request, id string) {
	if strings.HasPrefix(req.Path, "/api/webhooks/github") {
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", githubSig(req.Body))
		return
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", standardSig(id, ts, req.Body, stdSecret))
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func escape(s string) string { return url.PathEscape(s) }
