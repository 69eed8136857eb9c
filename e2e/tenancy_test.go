package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"svc.dev/e2e/harness"
)

// The tenancy matrix: every operation of the public API document, called by organization B
// with a session and with an API key on organization A's resources, must answer as if they
// did not exist (404 not_found on the service routes; the auth layer's own codes on
// /api/auth/*), never with A's data, and must change nothing of A's.
//
// The routes come from proto/openapi/svc.yaml at test time: an operation the document gains
// without an entry in tenancyMatrix fails TestTenancyMatrixCoversTheDocument (and TestTenancy)
// by name, so a new route cannot slip past the matrix.

// tenancyDocument is the OpenAPI document the matrix is held to.
const tenancyDocument = "../proto/openapi/svc.yaml"

// docRoute is one operation of the document.
type docRoute struct {
	Method, Path string
	// Open is an operation whose security is empty (no credentials needed at the gateway).
	Open bool
}

func (r docRoute) key() string { return r.Method + " " + r.Path }

// needsEntry: an operation that addresses a resource by a path parameter, is guarded, or
// belongs to the auth layer (whose routes act on the caller's session and organizations)
// must say how it is probed.
func (r docRoute) needsEntry() bool {
	return strings.Contains(r.Path, "{") || !r.Open || strings.HasPrefix(r.Path, "/api/auth/")
}

// documentRoutes reads every operation of the document, in document order.
func documentRoutes(t *testing.T) []docRoute {
	t.Helper()
	raw, err := os.ReadFile(tenancyDocument)
	require.NoError(t, err)
	var doc struct {
		Security []map[string][]string `yaml:"security"`
		Paths    yaml.Node             `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Equal(t, yaml.MappingNode, doc.Paths.Kind, "paths is a mapping")
	var out []docRoute
	for i := 0; i+1 < len(doc.Paths.Content); i += 2 {
		path, item := doc.Paths.Content[i].Value, doc.Paths.Content[i+1]
		for j := 0; j+1 < len(item.Content); j += 2 {
			method := item.Content[j].Value
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
			default:
				continue // parameters, summary, ...
			}
			var op struct {
				Security *[]map[string][]string `yaml:"security"`
			}
			require.NoError(t, item.Content[j+1].Decode(&op), "%s %s", method, path)
			open := len(doc.Security) == 0
			if op.Security != nil {
				open = len(*op.Security) == 0
			}
			out = append(out, docRoute{Method: strings.ToUpper(method), Path: path, Open: open})
		}
	}
	require.NotEmpty(t, out)
	return out
}

// caller is one of B's credentials.
type caller struct {
	mode string // "bearer" (session token), "cookie" (signed session cookie) or "api-key"
	c    *client
	// spare is another session of B in the same form, for the probe that signs out.
	spare *client
}

func (c caller) key() bool { return c.mode == "api-key" }

// tenancyProbe is one request of B and what it must answer.
type tenancyProbe struct {
	name   string
	method string
	path   string
	body   any
	// as replaces the caller's client (a probe that must not spend B's main session).
	as   *client
	want func(t *testing.T, r response)
}

// tenancyEntry builds the probes of one operation for one of B's callers.
type tenancyEntry func(f *tenancyFixture, c caller) []tenancyProbe

// tenancyFixture is A's resources and B's credentials.
type tenancyFixture struct {
	t   *testing.T
	sys *harness.System
	a   account
	b   account
	// bKey is B's organization's API key (raw); bCookie speaks with a session cookie of B's;
	// the spares are more sessions of B, for sign-out.
	bKey                      string
	bCookie                   *client
	bSpareToken, bSpareCookie *client

	orgA, slugA, memberA string
	wfA, wfA2, nameA     string
	runA, runA2          string
	schA, schA2          string
	keyA, keyARaw        string
	invA, inviteeEmail   string
	marker               string
	// B's own workflow and schedule, for the routes that take an id of A in a body.
	wfB, schB string
}

// secrets are strings of A that no answer to B may carry unless B sent them itself.
func (f *tenancyFixture) secrets() []string {
	return []string{f.a.email, f.a.userID, f.orgA, f.slugA, f.memberA, f.wfA, f.wfA2, f.nameA,
		f.runA, f.runA2, f.schA, f.schA2, f.keyA, f.keyARaw, f.invA, f.inviteeEmail, f.marker}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func newTenancyFixture(t *testing.T, sys *harness.System) *tenancyFixture {
	t.Helper()
	f := &tenancyFixture{t: t, sys: sys, a: signUp(t, sys, "tenancy-a"), b: signUp(t, sys, "tenancy-b")}
	f.marker = "a-secret-" + randomHex(t, 8)
	a := f.a.c

	s := a.get("/api/auth/get-session")
	require.Equal(t, http.StatusOK, s.Status, s.Raw)
	f.orgA, _ = obj(t, s.Body["session"])["activeOrganizationId"].(string)
	require.Regexp(t, `^org_`, f.orgA)
	orgs := a.get("/api/auth/organization/list")
	require.Equal(t, http.StatusOK, orgs.Status, orgs.Raw)
	for _, o := range arr(t, decodeAny(t, orgs.Raw)) {
		if obj(t, o)["id"] == f.orgA {
			f.slugA, _ = obj(t, o)["slug"].(string)
		}
	}
	require.NotEmpty(t, f.slugA, orgs.Raw)
	members := a.get("/api/auth/organization/list-members")
	require.Equal(t, http.StatusOK, members.Status, members.Raw)
	f.memberA, _ = obj(t, arr(t, members.Body["members"])[0])["id"].(string)
	require.Regexp(t, `^mem_`, f.memberA)

	k := a.post("/api/auth/api-key/create", map[string]any{"name": "a-key"})
	require.Equal(t, http.StatusOK, k.Status, k.Raw)
	f.keyA, _ = k.Body["id"].(string)
	f.keyARaw, _ = k.Body["key"].(string)
	require.NotEmpty(t, f.keyARaw, k.Raw)

	f.inviteeEmail = uniqueEmail("tenancy-invitee")
	inv := a.post("/api/auth/organization/invite-member", map[string]any{"email": f.inviteeEmail, "role": "member"})
	require.Equal(t, http.StatusOK, inv.Status, inv.Raw)
	f.invA, _ = inv.Body["id"].(string)
	require.NotEmpty(t, f.invA, inv.Raw)

	au := &runsUser{t: t, sys: sys, c: a}
	f.nameA = "tenancy " + f.marker
	f.wfA = au.workflow(f.nameA, wfDef(
		wfBlocks(wfTrigger(nil), wfBlock("hold", "wait", map[string]any{"signal": "go"})),
		wfEdge("start", "hold")))
	f.wfA2 = au.workflow(f.nameA+" 2", wfDef(wfBlocks(wfTrigger(nil), wfBlock("say", "log", map[string]any{"message": "hi"})), wfEdge("start", "say")))
	f.runA = au.startRun(f.wfA, map[string]any{"input": map[string]any{"secret": f.marker}})
	f.runA2 = au.startRun(f.wfA2, map[string]any{"input": map[string]any{"secret": f.marker}})
	au.pollRun(f.runA, "waiting in hold", waitingAt("hold", "signal"))
	au.waitStatus(f.runA2, "completed")
	f.schA = f.schedule(a, f.wfA, f.marker)
	f.schA2 = f.schedule(a, f.wfA2, f.marker)

	k = f.b.c.post("/api/auth/api-key/create", map[string]any{"name": "b-key"})
	require.Equal(t, http.StatusOK, k.Status, k.Raw)
	f.bKey, _ = k.Body["key"].(string)
	require.NotEmpty(t, f.bKey, k.Raw)
	signIn := func() response {
		in := newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": f.b.email, "password": f.b.password})
		require.Equal(t, http.StatusOK, in.Status, in.Raw)
		return in
	}
	cookie := sessionCookie(t, signIn().Header)
	f.bCookie = newClient(t, sys).with(func(c *client) { c.cookie = cookie })
	spare, _ := signIn().Body["token"].(string)
	f.bSpareToken = newClient(t, sys).with(func(c *client) { c.token = spare })
	spareCookie := sessionCookie(t, signIn().Header)
	f.bSpareCookie = newClient(t, sys).with(func(c *client) { c.cookie = spareCookie })

	bu := &runsUser{t: t, sys: sys, c: f.b.c}
	f.wfB = bu.workflow("tenancy b", wfDef(wfBlocks(wfTrigger(nil))))
	f.schB = f.schedule(f.b.c, f.wfB, "b")
	return f
}

// schedule creates a schedule that never comes due while the test runs.
func (f *tenancyFixture) schedule(c *client, wf, input string) string {
	f.t.Helper()
	r := c.post("/api/schedules", map[string]any{"workflowId": wf, "cron": "0 0 1 1 *", "input": map[string]any{"secret": input}})
	require.Equal(f.t, http.StatusCreated, r.Status, r.Raw)
	id, _ := r.Body["id"].(string)
	require.Regexp(f.t, `^sch_`, id)
	return id
}

// callers are B's session (as a bearer token and as a cookie) and B's API key.
func (f *tenancyFixture) callers() []caller {
	return []caller{
		{mode: "bearer", c: f.b.c, spare: f.bSpareToken},
		{mode: "cookie", c: f.bCookie, spare: f.bSpareCookie},
		{mode: "api-key", c: newClient(f.t, f.sys).with(func(c *client) { c.apiKey = f.bKey })},
	}
}

// snapshot is everything of A's that B's calls must leave as it was, read as A.
func (f *tenancyFixture) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{
		"/api/workflows/" + f.wfA, "/api/workflows/" + f.wfA2, "/api/workflows",
		"/api/runs/" + f.runA + "?include=workflow", "/api/runs/" + f.runA2, "/api/runs",
		"/api/runs/" + f.runA + "/logs", "/api/runs/" + f.runA2 + "/logs",
		"/api/schedules/" + f.schA, "/api/schedules/" + f.schA2, "/api/schedules",
		"/api/organizations/current/retention",
		"/api/auth/organization/list", "/api/auth/organization/list-members", "/api/auth/api-key/list",
	} {
		r := f.a.c.get(p)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", p, r.Raw)
		out[p] = r.Raw
	}
	return out
}

// Expectations.

func wantServiceError(status int, code string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) { t.Helper(); requireError(t, r, status, code) }
}

func wantAuthCode(status int, code string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) { t.Helper(); requireCode(t, r, status, code) }
}

var wantNotFound = wantServiceError(http.StatusNotFound, "not_found") //nolint:gochecknoglobals // test table

// wantMCPToolError: an MCP tools/call answered 200 with a tool error whose text carries the
// contract's code.
func wantMCPToolError(code string) func(t *testing.T, r response) {
	return func(t *testing.T, r response) {
		t.Helper()
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		result, ok := r.Body["result"].(map[string]any)
		require.True(t, ok, "a JSON-RPC result: %s", r.Raw)
		require.Equal(t, true, result["isError"], r.Raw)
		require.Contains(t, r.Raw, `\"error\":\"`+code+`\"`, "the tool error carries %s", code)
	}
}

func wantStatus(status int) func(t *testing.T, r response) {
	return func(t *testing.T, r response) { t.Helper(); require.Equal(t, status, r.Status, r.Raw) }
}

// sessionOrKey is onSession for B's session callers, onKey for B's API key.
func sessionOrKey(c caller, onSession, onKey func(*testing.T, response)) func(*testing.T, response) {
	if c.key() {
		return onKey
	}
	return onSession
}

// wantKeyRefused: key administration with an API key.
var wantKeyRefused = wantAuthCode(http.StatusUnauthorized, "INVALID_REFERENCE_ID_FROM_API_KEY") //nolint:gochecknoglobals // test table

// wantNotMember: an organization id of A's in an auth-layer request.
var wantNotMember = wantAuthCode(http.StatusForbidden, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION") //nolint:gochecknoglobals // test table

// tenancyMatrix: per operation of the document, the probes B sends. A foreign id must answer
// exactly as a missing one (existence is not revealed); the generic checks (no 5xx, none of
// A's strings in the answer unless B sent them) run on every probe.
func tenancyMatrix() map[string]tenancyEntry {
	missingWF, missingRun, missingSch := "wf_01jzzzzzzzzzzzzzzzzzzzzzzz", "run_01jzzzzzzzzzzzzzzzzzzzzzzz", "sch_01jzzzzzzzzzzzzzzzzzzzzzzz"
	missingOrg, missingKey, missingMem, missingInv := "org_01jzzzzzzzzzzzzzzzzzzzzzzz", "key_01jzzzzzzzzzzzzzzzzzzzzzzz", "mem_01jzzzzzzzzzzzzzzzzzzzzzzz", "inv_01jzzzzzzzzzzzzzzzzzzzzzzz"

	// foreign is the probe on A's id and the same probe on an id nobody has: both must be want.
	foreign := func(label, method, pathFmt, aID, noID string, body func(id string) any, want func(*testing.T, response)) []tenancyProbe {
		mk := func(name, id string) tenancyProbe {
			name += label
			p := tenancyProbe{name: name, method: method, path: fmt.Sprintf(pathFmt, id), want: want}
			if body != nil {
				p.body = body(id)
			}
			return p
		}
		return []tenancyProbe{mk("foreign", aID), mk("missing", noID)}
	}

	return map[string]tenancyEntry{
		"GET /health": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "open", method: "GET", path: "/health", want: wantStatus(http.StatusOK)}}
		},

		// --- workflow-editor ----------------------------------------------------------------
		"POST /api/workflows": func(f *tenancyFixture, c caller) []tenancyProbe {
			// Names are unique per organization only: A's name is free in B's.
			name := f.nameA + " " + c.mode
			return []tenancyProbe{{name: "same-name-as-A", method: "POST", path: "/api/workflows", body: map[string]any{"name": name},
				want: func(t *testing.T, r response) {
					t.Helper()
					require.Equal(t, http.StatusCreated, r.Status, r.Raw)
					id, _ := r.Body["id"].(string)
					require.NotEqual(t, f.wfA, id)
					// Gone again, so that B's lists below hold nothing named like A's.
					del := c.c.with(func(cl *client) { cl.t = t }).do("DELETE", "/api/workflows/"+id, nil)
					require.Equal(t, http.StatusNoContent, del.Status, del.Raw)
				}}}
		},
		"GET /api/workflows": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "list", method: "GET", path: "/api/workflows?limit=500", want: wantStatus(http.StatusOK)}}
		},
		"GET /api/workflows/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "GET", "/api/workflows/%s", f.wfA, missingWF, nil, wantNotFound)
		},
		"PATCH /api/workflows/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(
				foreign("", "PATCH", "/api/workflows/%s", f.wfA, missingWF, func(string) any { return map[string]any{"name": "stolen"} }, wantNotFound),
				tenancyProbe{name: "foreign-if-match", method: "PATCH", path: "/api/workflows/" + f.wfA, body: map[string]any{"description": "stolen"},
					as: c.c.with(func(c *client) { c.headers = map[string]string{"If-Match": "1"} }), want: wantNotFound})
		},
		"DELETE /api/workflows/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "DELETE", "/api/workflows/%s", f.wfA, missingWF, nil, wantNotFound)
		},
		"POST /api/workflows/{id}/operations": func(f *tenancyFixture, c caller) []tenancyProbe {
			ops := func(string) any {
				return map[string]any{"ops": []any{map[string]any{"operation_type": "remove", "block_id": "hold"}}}
			}
			return foreign("", "POST", "/api/workflows/%s/operations", f.wfA, missingWF, ops, wantNotFound)
		},
		"GET /api/connectors": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "catalog", method: "GET", path: "/api/connectors", want: wantStatus(http.StatusOK)}}
		},

		// --- run-orchestrator ---------------------------------------------------------------
		"POST /api/workflows/{id}/run": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "POST", "/api/workflows/%s/run", f.wfA, missingWF,
				func(string) any { return map[string]any{"input": map[string]any{}} }, wantNotFound)
		},
		"GET /api/workflows/{id}/runs": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(append(foreign("", "GET", "/api/workflows/%s/runs", f.wfA, missingWF, nil, wantNotFound),
				foreign(" status", "GET", "/api/workflows/%s/runs?status=waiting", f.wfA, missingWF, nil, wantNotFound)...),
				// Ids no workflow can have answer the same, without a server error.
				tenancyProbe{name: "not an id", method: "GET", path: "/api/workflows/not-an-id/runs", want: wantNotFound},
				tenancyProbe{name: "long id", method: "GET", path: "/api/workflows/wf_" + strings.Repeat("z", 5000) + "/runs", want: wantNotFound})
		},
		"GET /api/runs": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append([]tenancyProbe{
				{name: "list", method: "GET", path: "/api/runs?limit=500", want: wantStatus(http.StatusOK)},
				{name: "list-waiting", method: "GET", path: "/api/runs?status=waiting", want: wantStatus(http.StatusOK)},
				{name: "workflowId NUL", method: "GET", path: "/api/runs?workflowId=%00", want: wantNotFound},
				{name: "workflowId not UTF-8", method: "GET", path: "/api/runs?workflowId=%ff", want: wantNotFound},
			}, foreign(" workflowId", "GET", "/api/runs?workflowId=%s", f.wfA, missingWF, nil, wantNotFound)...)
		},
		"GET /api/runs/{runId}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(foreign("", "GET", "/api/runs/%s", f.runA, missingRun, nil, wantNotFound),
				foreign(" include", "GET", "/api/runs/%s?include=workflow", f.runA, missingRun, nil, wantNotFound)...)
		},
		"GET /api/runs/{runId}/logs": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "GET", "/api/runs/%s/logs", f.runA, missingRun, nil, wantNotFound)
		},
		"GET /api/runs/{runId}/events": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(foreign("", "GET", "/api/runs/%s/events", f.runA, missingRun, nil, wantNotFound),
				tenancyProbe{name: "foreign-finished", method: "GET", path: "/api/runs/" + f.runA2 + "/events", want: wantNotFound})
		},
		"GET /api/runs/events": func(f *tenancyFixture, c caller) []tenancyProbe {
			// The stream lasts until the client leaves: probed where it answers at once. The
			// organization's stream names none of A's runs (events_test.go).
			return []tenancyProbe{{name: "bad status", method: "GET", path: "/api/runs/events?status=nope", want: wantStatus(http.StatusBadRequest)}}
		},
		"POST /api/runs/{runId}/cancel": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(foreign("", "POST", "/api/runs/%s/cancel", f.runA, missingRun, nil, wantNotFound),
				// A finished run: 404, not 409 run_finished (which would tell it exists).
				tenancyProbe{name: "foreign-finished", method: "POST", path: "/api/runs/" + f.runA2 + "/cancel", want: wantNotFound})
		},
		"POST /api/runs/{runId}/signals": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(foreign("", "POST", "/api/runs/%s/signals", f.runA, missingRun,
				func(string) any { return map[string]any{"name": "go", "payload": "from b"} }, wantNotFound),
				tenancyProbe{name: "foreign-finished", method: "POST", path: "/api/runs/" + f.runA2 + "/signals",
					body: map[string]any{"name": "go"}, want: wantNotFound})
		},

		"GET /api/organizations/{orgId}/retention": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "GET", "/api/organizations/%s/retention", f.orgA, missingOrg, nil, wantNotFound)
		},
		"PUT /api/organizations/{orgId}/retention": func(f *tenancyFixture, c caller) []tenancyProbe {
			// A's setting stays as it was: A's own read of it is in the fixture's snapshot.
			return foreign("", "PUT", "/api/organizations/%s/retention", f.orgA, missingOrg,
				func(string) any { return map[string]any{"runRetention": "5m"} }, wantNotFound)
		},

		// --- scheduler ----------------------------------------------------------------------
		"POST /api/schedules": func(f *tenancyFixture, c caller) []tenancyProbe {
			// A workflow not in this organization is 404 workflow_not_found.
			return foreign("", "POST", "/api/schedules%.0s", f.wfA, missingWF, func(id string) any {
				return map[string]any{"workflowId": id, "cron": "* * * * *"}
			}, wantServiceError(http.StatusNotFound, "workflow_not_found"))
		},
		"GET /api/schedules": func(f *tenancyFixture, c caller) []tenancyProbe {
			// As for the runs of a workflow: a filter naming a foreign workflow is not found,
			// exactly as a missing one, never an empty list.
			return append([]tenancyProbe{{name: "list", method: "GET", path: "/api/schedules?limit=500", want: wantStatus(http.StatusOK)}},
				foreign(" workflowId", "GET", "/api/schedules?workflowId=%s", f.wfA, missingWF, nil, wantNotFound)...)
		},
		"GET /api/schedules/preview": func(f *tenancyFixture, c caller) []tenancyProbe {
			// Reads no organization's data: a cron's next fire times, the same for everyone,
			// and nothing else in the answer.
			return []tenancyProbe{{name: "preview", method: "GET", path: "/api/schedules/preview?cron=0+9+*+*+1&timezone=UTC", want: func(t *testing.T, r response) {
				t.Helper()
				require.Equal(t, http.StatusOK, r.Status, r.Raw)
				require.Len(t, r.Body, 1, "only next: %s", r.Raw)
				require.Contains(t, r.Body, "next", r.Raw)
			}}}
		},
		"GET /api/schedules/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "GET", "/api/schedules/%s", f.schA, missingSch, nil, wantNotFound)
		},
		"PATCH /api/schedules/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return append(foreign("", "PATCH", "/api/schedules/%s", f.schA, missingSch,
				func(string) any { return map[string]any{"enabled": false, "cron": "* * * * *"} }, wantNotFound),
				// B's own schedule pointed at A's workflow: A's workflow is not B's.
				tenancyProbe{name: "own-to-foreign-workflow", method: "PATCH", path: "/api/schedules/" + f.schB,
					body: map[string]any{"workflowId": f.wfA}, want: wantServiceError(http.StatusNotFound, "workflow_not_found")})
		},
		"DELETE /api/schedules/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return foreign("", "DELETE", "/api/schedules/%s", f.schA, missingSch, nil, wantNotFound)
		},
		"POST /api/admin/tick": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "tick", method: "POST", path: "/api/admin/tick", body: map[string]any{}, want: wantStatus(http.StatusOK)}}
		},

		// MCP: a tool call names A's workflow or run in its arguments; it must fail as for an id
		// nobody has, as a tool error carrying not_found (the call itself is answered 200).
		"POST /api/mcp": func(f *tenancyFixture, c caller) []tenancyProbe {
			call := func(name, label, tool string, args map[string]any) tenancyProbe {
				return tenancyProbe{name: name + " " + label, method: "POST", path: "/api/mcp", want: wantMCPToolError("not_found"),
					body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}}
			}
			return []tenancyProbe{
				call("foreign", "workflows_get", "workflows_get", map[string]any{"workflow_id": f.wfA}),
				call("missing", "workflows_get", "workflows_get", map[string]any{"workflow_id": missingWF}),
				call("foreign", "runs_get", "runs_get", map[string]any{"run_id": f.runA}),
				call("missing", "runs_get", "runs_get", map[string]any{"run_id": missingRun}),
			}
		},

		// --- open routes ----------------------------------------------------------------------
		"POST /api/bootstrap": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "closed", method: "POST", path: "/api/bootstrap",
				body: map[string]any{"email": uniqueEmail("tenancy-boot"), "password": "correct horse battery"}, want: wantNotFound}}
		},
		"POST /api/webhooks/github": func(f *tenancyFixture, c caller) []tenancyProbe {
			// No route is configured in this system: credentials open nothing.
			return []tenancyProbe{{name: "unconfigured", method: "POST", path: "/api/webhooks/github", body: map[string]any{}, want: wantNotFound}}
		},
		"POST /api/webhooks/events/{source}": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "unconfigured", method: "POST", path: "/api/webhooks/events/" + f.slugA, body: map[string]any{}, want: wantNotFound}}
		},

		// --- identity (auth layer) ------------------------------------------------------------
		"POST /api/auth/sign-up/email": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "A's email", method: "POST", path: "/api/auth/sign-up/email",
				body: map[string]any{"email": f.a.email, "password": "another password"},
				want: wantAuthCode(http.StatusUnprocessableEntity, "USER_ALREADY_EXISTS")}}
		},
		"POST /api/auth/sign-in/email": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "A's email, a guess", method: "POST", path: "/api/auth/sign-in/email",
				body: map[string]any{"email": f.a.email, "password": "not " + f.a.password},
				want: wantAuthCode(http.StatusUnauthorized, "INVALID_CREDENTIALS")}}
		},
		"POST /api/auth/sign-out": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				// No session to end: a no-op (B's key keeps working for the probes after it).
				return []tenancyProbe{{name: "by key", method: "POST", path: "/api/auth/sign-out", body: map[string]any{}, want: func(t *testing.T, r response) {
					t.Helper()
					require.Equal(t, http.StatusOK, r.Status, r.Raw)
					require.Equal(t, true, r.Body["success"], r.Raw)
				}}}
			}
			// A spare session of B's signs out; A's sessions are untouched (the snapshot and the
			// checks after the matrix read as A).
			return []tenancyProbe{{name: "own session", method: "POST", path: "/api/auth/sign-out", body: map[string]any{}, as: c.spare,
				want: wantStatus(http.StatusOK)}}
		},
		"GET /api/auth/get-session": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "own", method: "GET", path: "/api/auth/get-session", want: func(t *testing.T, r response) {
				t.Helper()
				require.Equal(t, http.StatusOK, r.Status, r.Raw)
				if c.key() {
					require.Equal(t, "null", strings.TrimSpace(r.Raw), "a key has no session")
					return
				}
				require.Equal(t, f.b.userID, obj(t, r.Body["session"])["userId"], r.Raw)
			}}}
		},
		"POST /api/auth/change-password": func(f *tenancyFixture, c caller) []tenancyProbe {
			// A's password is not B's: nothing changes (A signs in with it at the end).
			return []tenancyProbe{{name: "A's password", method: "POST", path: "/api/auth/change-password",
				body: map[string]any{"currentPassword": f.a.password + "x", "newPassword": "stolen password"},
				want: sessionOrKey(c, wantAuthCode(http.StatusUnauthorized, "INVALID_CREDENTIALS"), wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))}}
		},
		"POST /api/auth/request-password-reset": func(f *tenancyFixture, c caller) []tenancyProbe {
			// The same answer whether the email is known: the link goes to A's mail, not to B.
			want := func(t *testing.T, r response) {
				t.Helper()
				require.Equal(t, http.StatusOK, r.Status, r.Raw)
				require.Equal(t, true, r.Body["status"], r.Raw)
			}
			return []tenancyProbe{
				{name: "A's email", method: "POST", path: "/api/auth/request-password-reset", body: map[string]any{"email": f.a.email}, want: want},
				{name: "nobody's email", method: "POST", path: "/api/auth/request-password-reset", body: map[string]any{"email": uniqueEmail("nobody")}, want: want},
			}
		},
		"POST /api/auth/reset-password": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "guessed token", method: "POST", path: "/api/auth/reset-password",
				body: map[string]any{"token": f.keyA, "newPassword": "stolen password"}, want: wantAuthCode(http.StatusBadRequest, "INVALID_TOKEN")}}
		},
		"POST /api/auth/organization/create": func(f *tenancyFixture, c caller) []tenancyProbe {
			return []tenancyProbe{{name: "A's slug", method: "POST", path: "/api/auth/organization/create",
				// Slugs are global (ORGANIZATION_ALREADY_EXISTS): nothing is created.
				body: map[string]any{"name": "stolen", "slug": f.slugA},
				want: sessionOrKey(c, wantAuthCode(http.StatusBadRequest, "ORGANIZATION_ALREADY_EXISTS"), wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))}}
		},
		"POST /api/auth/organization/set-active": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				// A key's organization is fixed: there is no session to change.
				return foreign("", "POST", "/api/auth/organization/set-active%.0s", f.orgA, missingOrg,
					func(id string) any { return map[string]any{"organizationId": id} }, wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))
			}
			return append(foreign("", "POST", "/api/auth/organization/set-active%.0s", f.orgA, missingOrg,
				func(id string) any { return map[string]any{"organizationId": id} }, wantNotMember),
				foreign(" slug", "POST", "/api/auth/organization/set-active%.0s", f.slugA, "no-such-slug-"+f.marker,
					func(slug string) any { return map[string]any{"organizationSlug": slug} }, wantNotMember)...)
		},
		"GET /api/auth/organization/list": func(f *tenancyFixture, c caller) []tenancyProbe {
			want := wantStatus(http.StatusOK)
			if c.key() {
				// The caller's organizations are a session's: a key has none to list.
				want = wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED")
			}
			return []tenancyProbe{{name: "own", method: "GET", path: "/api/auth/organization/list", want: want}}
		},
		"POST /api/auth/organization/invite-member": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return foreign("", "POST", "/api/auth/organization/invite-member%.0s", f.orgA, missingOrg, func(id string) any {
					return map[string]any{"email": uniqueEmail("tenancy-x"), "role": "owner", "organizationId": id}
				}, wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))
			}
			return foreign("", "POST", "/api/auth/organization/invite-member%.0s", f.orgA, missingOrg, func(id string) any {
				return map[string]any{"email": uniqueEmail("tenancy-x"), "role": "owner", "organizationId": id}
			}, wantNotMember)
		},
		"POST /api/auth/organization/accept-invitation": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return foreign("", "POST", "/api/auth/organization/accept-invitation%.0s", f.invA, missingInv,
					func(id string) any { return map[string]any{"invitationId": id} }, wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))
			}
			// better-auth tells a pending invitation of someone else (403) from none (400); the
			// contract keeps its codes. What matters here: B does not join A (the snapshot's
			// members are unchanged) and the invitee still can (checked at the end).
			return []tenancyProbe{
				{name: "foreign", method: "POST", path: "/api/auth/organization/accept-invitation", body: map[string]any{"invitationId": f.invA},
					want: wantAuthCode(http.StatusForbidden, "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION")},
				{name: "missing", method: "POST", path: "/api/auth/organization/accept-invitation", body: map[string]any{"invitationId": missingInv},
					want: wantAuthCode(http.StatusBadRequest, "INVITATION_NOT_FOUND")},
			}
		},
		"GET /api/auth/organization/list-members": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return append([]tenancyProbe{{name: "own", method: "GET", path: "/api/auth/organization/list-members", want: wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED")}},
					foreign(" organizationId", "GET", "/api/auth/organization/list-members?organizationId=%s", f.orgA, missingOrg, nil, wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))...)
			}
			return append([]tenancyProbe{{name: "own", method: "GET", path: "/api/auth/organization/list-members", want: wantStatus(http.StatusOK)}},
				foreign(" organizationId", "GET", "/api/auth/organization/list-members?organizationId=%s", f.orgA, missingOrg, nil, wantNotMember)...)
		},
		"POST /api/auth/organization/remove-member": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return foreign("", "POST", "/api/auth/organization/remove-member%.0s", f.memberA, missingMem,
					func(id string) any { return map[string]any{"memberIdOrEmail": id} }, wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))
			}
			return append(append(
				// In B's active organization A's member is no member at all.
				foreign("", "POST", "/api/auth/organization/remove-member%.0s", f.memberA, missingMem,
					func(id string) any { return map[string]any{"memberIdOrEmail": id} }, wantAuthCode(http.StatusBadRequest, "MEMBER_NOT_FOUND")),
				foreign(" email", "POST", "/api/auth/organization/remove-member%.0s", f.a.email, uniqueEmail("nobody"),
					func(email string) any { return map[string]any{"memberIdOrEmail": email} }, wantAuthCode(http.StatusBadRequest, "MEMBER_NOT_FOUND"))...),
				foreign(" organizationId", "POST", "/api/auth/organization/remove-member%.0s", f.orgA, missingOrg,
					func(id string) any { return map[string]any{"memberIdOrEmail": f.memberA, "organizationId": id} }, wantNotMember)...)
		},
		"POST /api/auth/organization/leave": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return foreign("", "POST", "/api/auth/organization/leave%.0s", f.orgA, missingOrg,
					func(id string) any { return map[string]any{"organizationId": id} }, wantAuthCode(http.StatusUnauthorized, "UNAUTHORIZED"))
			}
			return foreign("", "POST", "/api/auth/organization/leave%.0s", f.orgA, missingOrg,
				func(id string) any { return map[string]any{"organizationId": id} }, wantNotMember)
		},
		"POST /api/auth/api-key/create": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return foreign("", "POST", "/api/auth/api-key/create%.0s", f.orgA, missingOrg,
					func(id string) any { return map[string]any{"name": "stolen", "organizationId": id} }, wantKeyRefused)
			}
			return foreign("", "POST", "/api/auth/api-key/create%.0s", f.orgA, missingOrg,
				func(id string) any { return map[string]any{"name": "stolen", "organizationId": id} }, wantNotMember)
		},
		"GET /api/auth/api-key/list": func(f *tenancyFixture, c caller) []tenancyProbe {
			if c.key() {
				return append([]tenancyProbe{{name: "own", method: "GET", path: "/api/auth/api-key/list", want: wantKeyRefused}},
					foreign(" organizationId", "GET", "/api/auth/api-key/list?organizationId=%s", f.orgA, missingOrg, nil, wantKeyRefused)...)
			}
			return append([]tenancyProbe{{name: "own", method: "GET", path: "/api/auth/api-key/list", want: wantStatus(http.StatusOK)}},
				foreign(" organizationId", "GET", "/api/auth/api-key/list?organizationId=%s", f.orgA, missingOrg, nil, wantNotMember)...)
		},
		"POST /api/auth/api-key/delete": func(f *tenancyFixture, c caller) []tenancyProbe {
			want := wantAuthCode(http.StatusNotFound, "KEY_NOT_FOUND")
			if c.key() {
				want = wantKeyRefused
			}
			return foreign("", "POST", "/api/auth/api-key/delete%.0s", f.keyA, missingKey,
				func(id string) any { return map[string]any{"keyId": id} }, want)
		},
		"DELETE /api/auth/api-key/{id}": func(f *tenancyFixture, c caller) []tenancyProbe {
			want := wantAuthCode(http.StatusNotFound, "KEY_NOT_FOUND")
			if c.key() {
				want = wantKeyRefused
			}
			return foreign("", "DELETE", "/api/auth/api-key/%s", f.keyA, missingKey, nil, want)
		},
		"POST /api/auth/api-key/verify": func(f *tenancyFixture, c caller) []tenancyProbe {
			// The raw key is the secret, not an id: B can only try ids and guesses.
			return foreign("", "POST", "/api/auth/api-key/verify%.0s", f.keyA, "svc_"+strings.Repeat("x", 64),
				func(k string) any { return map[string]any{"key": k} }, wantAuthCode(http.StatusUnauthorized, "INVALID_TOKEN"))
		},
	}
}

// TestTenancyMatrixCoversTheDocument: every operation of the document that needs an entry has
// one, and no entry names an operation the document no longer has. It needs no system, so a
// route added without its tenancy probes fails fast, by name.
func TestTenancyMatrixCoversTheDocument(t *testing.T) {
	t.Parallel()
	requireMatrixCovers(t, documentRoutes(t), tenancyMatrix())
}

// A route the document gains is caught: with a path parameter, guarded, or in the auth layer
// it needs an entry; an open route without a parameter does not.
func TestTenancyMatrixGaps(t *testing.T) {
	t.Parallel()
	routes := append(documentRoutes(t),
		docRoute{Method: "GET", Path: "/api/things/{thingId}"},
		docRoute{Method: "POST", Path: "/api/things"},
		docRoute{Method: "POST", Path: "/api/auth/organization/update", Open: true},
		docRoute{Method: "GET", Path: "/api/version", Open: true})
	matrix := tenancyMatrix()
	matrix["GET /api/gone/{id}"] = nil
	missing, stale := matrixGaps(routes, matrix)
	require.Equal(t, []string{"GET /api/things/{thingId}", "POST /api/things", "POST /api/auth/organization/update"}, missing)
	require.Equal(t, []string{"GET /api/gone/{id}"}, stale)
}

// matrixGaps lists the operations that need an entry and have none, and the entries of
// operations the document does not have.
func matrixGaps(routes []docRoute, matrix map[string]tenancyEntry) (missing, stale []string) {
	inDoc := map[string]bool{}
	for _, r := range routes {
		inDoc[r.key()] = true
		if _, ok := matrix[r.key()]; !ok && r.needsEntry() {
			missing = append(missing, r.key())
		}
	}
	for k := range matrix {
		if !inDoc[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	return missing, stale
}

func requireMatrixCovers(t *testing.T, routes []docRoute, matrix map[string]tenancyEntry) {
	t.Helper()
	missing, stale := matrixGaps(routes, matrix)
	if len(missing) > 0 {
		t.Errorf("%s has operations the tenancy matrix cannot probe: %s.\n"+
			"Add an entry per operation to tenancyMatrix (e2e/tenancy_test.go): the requests organization B "+
			"sends with A's ids (or, for a route without one, what B's call must not reveal) and what each must answer.",
			tenancyDocument, strings.Join(missing, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("tenancyMatrix has entries for operations %s does not have: %s", tenancyDocument, strings.Join(stale, ", "))
	}
}

// TestTenancy runs the matrix: organization B, by session (bearer token and cookie) and by API
// key, against every operation of the document on organization A's resources, in one system.
// The probes run one after another: A's state is compared once all of them are done, and the
// sign-out probes spend sessions of B's that no other probe uses.
func TestTenancy(t *testing.T) {
	t.Parallel()
	routes := documentRoutes(t)
	matrix := tenancyMatrix()
	requireMatrixCovers(t, routes, matrix)

	sys := harness.Start(t, harness.Options{Env: map[string]string{
		"SVC_TRUSTED_ORIGINS": testOrigin, "SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_SCHEDULER_TICK": "0", "SVC_MAIL": "log",
	}})
	f := newTenancyFixture(t, sys)
	before := f.snapshot(t)

	probed := 0
	for _, rt := range routes {
		entry, ok := matrix[rt.key()]
		if !ok {
			continue // reported above when it needed one
		}
		t.Run(rt.key(), func(t *testing.T) {
			for _, c := range f.callers() {
				probes := entry(f, c)
				require.NotEmpty(t, probes, "%s: the entry has no probes for %s", rt.key(), c.mode)
				for _, p := range probes {
					t.Run(c.mode+"/"+p.name, func(t *testing.T) {
						f.runProbe(t, rt, c, p)
					})
					probed++
				}
			}
		})
	}
	t.Logf("tenancy matrix: %d operations, %d probes", len(routes), probed)

	t.Run("AUnchanged", func(t *testing.T) {
		after := f.snapshot(t)
		for k, v := range before {
			require.JSONEq(t, v, after[k], "%s changed after B's calls", k)
		}
		// A's key and password still work, the invitation is still the invitee's to accept,
		// and A's waiting run took no signal of B's.
		aKey := newClient(t, sys).with(func(c *client) { c.apiKey = f.keyARaw })
		r := aKey.get("/api/workflows/" + f.wfA)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		in := newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": f.a.email, "password": f.a.password})
		require.Equal(t, http.StatusOK, in.Status, in.Raw)
		invitee := newClient(t, sys).post("/api/auth/sign-up/email", map[string]any{"email": f.inviteeEmail, "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, invitee.Status, invitee.Raw)
		tok, _ := invitee.Body["token"].(string)
		acc := newClient(t, sys).with(func(c *client) { c.token = tok }).post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": f.invA})
		require.Equal(t, http.StatusOK, acc.Status, acc.Raw)
		s := f.a.c.post("/api/runs/"+f.runA+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusAccepted, s.Status, s.Raw)
		require.Equal(t, true, s.Body["delivered"], "a signal of B's was stored for A's run: %s", s.Raw)
		(&runsUser{t: t, sys: sys, c: f.a.c}).waitStatus(f.runA, "completed")
	})

	t.Run("CursorsAreBoundToTheirList", func(t *testing.T) {
		a, b := f.a.c.with(func(c *client) { c.t = t }), f.b.c.with(func(c *client) { c.t = t })
		first := func(c *client, path string) string {
			t.Helper()
			r := c.get(path)
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			next, _ := r.Body["nextCursor"].(string)
			require.NotEmpty(t, next, "%s: want a next page: %s", path, r.Raw)
			return url.QueryEscape(next)
		}
		invalid := wantServiceError(http.StatusBadRequest, "invalid_query")

		// A logs cursor is a change sequence of one run: on another run it skipped entries.
		logs := first(a, "/api/runs/"+f.runA2+"/logs?limit=1")
		invalid(t, a.get("/api/runs/"+f.runA+"/logs?after="+logs))
		require.Equal(t, http.StatusOK, a.get("/api/runs/"+f.runA2+"/logs?after="+logs).Status)

		runs := first(a, "/api/runs?limit=1")
		invalid(t, a.get("/api/runs?workflowId="+f.wfA+"&after="+runs))
		invalid(t, a.get("/api/runs?status=completed&after="+runs))
		invalid(t, b.get("/api/runs?after="+runs))
		require.Equal(t, http.StatusOK, a.get("/api/runs?after="+runs).Status)

		schedules := first(a, "/api/schedules?limit=1")
		invalid(t, a.get("/api/schedules?workflowId="+f.wfA+"&after="+schedules))
		invalid(t, b.get("/api/schedules?after="+schedules))
		require.Equal(t, http.StatusOK, a.get("/api/schedules?after="+schedules).Status)

		workflows := first(a, "/api/workflows?limit=1")
		invalid(t, b.get("/api/workflows?after="+workflows))
		require.Equal(t, http.StatusOK, a.get("/api/workflows?after="+workflows).Status)
	})

	t.Run("EditorDown", func(t *testing.T) { tenancyEditorDown(t, sys, f) })
}

// tenancyEditorDown (the last step of TestTenancy: the editor stays down): whether a workflow is
// B's cannot be told without the editor unless B has runs of it, so B's request is 503
// unavailable, never a 500 and never a guess (an empty list or a 404 either way); A's runs
// prove the workflow is A's, so A's list needs no editor.
func tenancyEditorDown(t *testing.T, sys *harness.System, f *tenancyFixture) {
	t.Helper()
	a, b := f.a.c.with(func(c *client) { c.t = t }), f.b.c.with(func(c *client) { c.t = t })
	live := sys.Live(harness.Editor)
	require.NotEmpty(t, live)
	for _, p := range live {
		p.Stop(t)
	}
	requireError(t, b.get("/api/workflows/"+f.wfA+"/runs"), http.StatusServiceUnavailable, "unavailable")
	requireError(t, b.get("/api/runs?workflowId="+f.wfA), http.StatusServiceUnavailable, "unavailable")
	r := a.get("/api/workflows/" + f.wfA + "/runs")
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, []any{f.runA}, runIDs(t, r))
	r = a.get("/api/runs?status=failed&workflowId=" + f.wfA)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Empty(t, runIDs(t, r))
}

// runProbe sends one probe as c and checks it: its own expectation, then what holds for every
// answer to B: no server error, no 403 outside the auth layer, none of A's strings that B did
// not send itself.
func (f *tenancyFixture) runProbe(t *testing.T, rt docRoute, c caller, p tenancyProbe) {
	t.Helper()
	require.Equal(t, rt.Method, p.method, "a probe of %s must use its method", rt.key())
	who := c.c
	if p.as != nil {
		who = p.as
		if c.key() {
			who = p.as.with(func(cl *client) { cl.token, cl.cookie, cl.apiKey = "", "", f.bKey })
		}
	}
	// Failures of the request itself belong to this subtest, not to the test that built the client.
	who = who.with(func(cl *client) { cl.t = t })
	r := who.do(p.method, p.path, p.body)
	raw := r.Raw
	if len(raw) > 160 {
		raw = raw[:160] + "..."
	}
	t.Logf("%s %s as B (%s): %d %s", p.method, p.path, c.mode, r.Status, strings.TrimSpace(raw))
	sent := p.path
	if p.body != nil {
		b, err := json.Marshal(p.body)
		require.NoError(t, err)
		sent += string(b)
	}
	require.Less(t, r.Status, 500, "%s %s: %s", p.method, p.path, r.Raw)
	if !strings.HasPrefix(rt.Path, "/api/auth/") {
		require.NotEqual(t, http.StatusForbidden, r.Status, "never 403 outside the auth layer: %s", r.Raw)
	}
	for _, s := range f.secrets() {
		if s != "" && !strings.Contains(sent, s) {
			require.NotContains(t, r.Raw, s, "%s %s as B (%s) answered A's data", p.method, p.path, c.mode)
		}
	}
	p.want(t, r)
}
