package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/boot"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
	editorv1 "svc.dev/proto/gen/editor/v1"
	"svc.dev/proto/gen/editor/v1/editorv1connect"
	"svc.dev/services/workflow-editor/internal/service"
)

// These tests drive the real composition (Postgres included) over HTTP, signing each request
// with the identity the gateway would send, so they hold the service to its public API (docs/API.md) without
// the identity service.

type system struct {
	url    string
	signer internalauth.Signer
}

type testBundle struct {
	sys *system
	org string
}

type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func start(t testing.TB) *system {
	t.Helper()
	secret := strings.Repeat("s", 32)
	_, keys := testkit.NewRedis(t) // its cleanup removes the catalog epochs the editor writes
	cfg := service.Config{Addr: ":0", Base: boot.Config{
		DatabaseURL:    testkit.NewDatabase(t),
		RedisURL:       testkit.RedisURL(t),
		RedisPrefix:    keys.Prefix(),
		InternalSecret: secret,
		LogLevel:       slog.LevelError,
		Drain:          time.Second,
	}}
	app, err := service.NewApplication(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	signer, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	return &system{url: srv.URL, signer: signer}
}

// setup gives each subtest its own organization on the shared system.
func (s *system) setup(t testing.TB) *testBundle {
	t.Helper()
	return &testBundle{sys: s, org: wire.NewID(wire.Organization)}
}

func (b *testBundle) do(t testing.TB, method, path string, body any, hdr ...string) response {
	t.Helper()
	return b.doAs(t, b.org, method, path, body, hdr...)
}

func (b *testBundle) doAs(t testing.TB, org, method, path string, body any, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.sys.url+path, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if org != "" {
		u, q, _ := strings.Cut(path, "?")
		b.sys.signer.Sign(req.Header, method, u, q, internalauth.Identity{UserID: "usr_test", OrganizationID: org, AuthMode: internalauth.ModeSession}, time.Now())
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := response{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// create makes a workflow with a trigger and returns its id.
func (b *testBundle) create(t testing.TB, name string, definition any) string {
	t.Helper()
	body := map[string]any{"name": name}
	if definition != nil {
		body["definition"] = definition
	}
	r := b.do(t, "POST", "/api/workflows", body)
	require.Equal(t, http.StatusCreated, r.Status, r.Raw)
	return r.Body["id"].(string)
}

func (b *testBundle) ops(t testing.TB, id string, ops string, hdr ...string) response {
	t.Helper()
	return b.do(t, "POST", "/api/workflows/"+id+"/operations", `{"ops":`+ops+`}`, hdr...)
}

func skipped(t testing.TB, r response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	items, ok := r.Body["skipped_items"].([]any)
	require.True(t, ok, r.Raw)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.(map[string]any)
	}
	return out
}

func validationCodes(t testing.TB, r response) map[string]map[string]any {
	t.Helper()
	items, ok := r.Body["validation_errors"].([]any)
	require.True(t, ok, r.Raw)
	out := map[string]map[string]any{}
	for _, it := range items {
		e := it.(map[string]any)
		if _, seen := out[e["code"].(string)]; !seen {
			out[e["code"].(string)] = e
		}
	}
	return out
}

func version(t testing.TB, r response) int {
	t.Helper()
	v, ok := r.Body["version"].(float64)
	require.True(t, ok, r.Raw)
	return int(v)
}

const pipeline = `[
 {"operation_type":"add","block_id":"start","type":"trigger.manual"},
 {"operation_type":"add","block_id":"fetch","type":"http.request","params":{"method":"GET","url":"https://example.com/{{ input.path }}"}},
 {"operation_type":"add","block_id":"check","type":"condition","params":{"expression":"steps.fetch.output.status == 200"}},
 {"operation_type":"add","block_id":"ok","type":"log","params":{"message":"got {{ steps.fetch.output.body }}"}},
 {"operation_type":"connect","block_id":"start","target_block_id":"fetch"},
 {"operation_type":"connect","block_id":"fetch","target_block_id":"check"},
 {"operation_type":"connect","block_id":"check","target_block_id":"ok","branch":"true"}
]`

func TestWorkflowEditor(t *testing.T) {
	t.Parallel()
	sys := start(t)

	t.Run("Unauthenticated", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		r := b.doAs(t, "", "GET", "/api/workflows", nil)
		require.Equal(t, http.StatusUnauthorized, r.Status)
		require.Equal(t, "unauthorized", r.Body["error"])
	})

	t.Run("CreateGetListDescribeDelete", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		r := b.do(t, "POST", "/api/workflows", map[string]any{"name": "first", "description": "d"})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		id := r.Body["id"].(string)
		require.True(t, wire.ValidID(wire.Workflow, id), id)
		require.Equal(t, 1, version(t, r))
		require.Equal(t, `"1"`, r.Header.Get("ETag"))
		require.Equal(t, map[string]any{"blocks": []any{}, "edges": []any{}}, r.Body["definition"])
		require.Equal(t, []any{}, r.Body["skipped_items"])
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, r.Body["createdAt"])
		require.Equal(t, "no_trigger", r.Body["validation_errors"].([]any)[0].(map[string]any)["code"])

		r = b.do(t, "POST", "/api/workflows", map[string]any{"name": "first"})
		require.Equal(t, http.StatusConflict, r.Status)
		require.Equal(t, "workflow_name_taken", r.Body["error"])
		for _, bad := range []string{`{}`, `{"name":""}`, `{"name":"   "}`, `{"name":"` + strings.Repeat("x", 201) + `"}`, `{"name":"x","extra":1}`, `[]`} {
			r = b.do(t, "POST", "/api/workflows", bad)
			require.Equal(t, http.StatusBadRequest, r.Status, bad)
			require.Equal(t, "invalid_body", r.Body["error"], bad)
			require.NotEmpty(t, r.Body["issues"], bad)
		}
		second := b.create(t, "second", nil)
		third := b.create(t, "third", nil)

		r = b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, `"1"`, r.Header.Get("ETag"))
		require.Equal(t, "first", r.Body["name"])
		require.Equal(t, "d", r.Body["description"])

		// Newest first, without definitions, two per page.
		r = b.do(t, "GET", "/api/workflows?limit=2", nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		items := r.Body["items"].([]any)
		require.Len(t, items, 2)
		require.Equal(t, third, items[0].(map[string]any)["id"])
		require.Equal(t, second, items[1].(map[string]any)["id"])
		require.NotContains(t, items[0], "definition")
		cursor := r.Body["nextCursor"].(string)
		r = b.do(t, "GET", "/api/workflows?limit=2&after="+cursor, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Len(t, r.Body["items"].([]any), 1)
		require.Equal(t, id, r.Body["items"].([]any)[0].(map[string]any)["id"])
		require.Nil(t, r.Body["nextCursor"])
		for _, q := range []string{"limit=0", "limit=501", "limit=x", "after=nope"} {
			r = b.do(t, "GET", "/api/workflows?"+q, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, q)
			require.Equal(t, "invalid_query", r.Body["error"], q)
		}

		// PATCH bumps the version and honours If-Match.
		r = b.do(t, "PATCH", "/api/workflows/"+id, map[string]any{"name": "renamed"}, "If-Match", `"1"`)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 2, version(t, r))
		require.Equal(t, "renamed", r.Body["name"])
		require.Equal(t, "d", r.Body["description"])
		r = b.do(t, "PATCH", "/api/workflows/"+id, map[string]any{"description": "new"}, "If-Match", "1")
		require.Equal(t, http.StatusPreconditionFailed, r.Status)
		require.Equal(t, "version_mismatch", r.Body["error"])
		require.Equal(t, float64(2), r.Body["current"])
		r = b.do(t, "PATCH", "/api/workflows/"+id, map[string]any{"description": "new"}, "If-Match", "two")
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Equal(t, "invalid_if_match", r.Body["error"])
		r = b.do(t, "PATCH", "/api/workflows/"+id, map[string]any{"name": "second"})
		require.Equal(t, http.StatusConflict, r.Status)
		require.Equal(t, "workflow_name_taken", r.Body["error"])
		r = b.do(t, "PATCH", "/api/workflows/"+id, map[string]any{"description": "new"})
		require.Equal(t, 3, version(t, r))

		r = b.do(t, "DELETE", "/api/workflows/"+id, nil)
		require.Equal(t, http.StatusNoContent, r.Status)
		require.Empty(t, r.Raw)
		for _, m := range []string{"GET", "DELETE"} {
			r = b.do(t, m, "/api/workflows/"+id, nil)
			require.Equal(t, http.StatusNotFound, r.Status, m)
			require.Equal(t, "not_found", r.Body["error"])
		}
		r = b.do(t, "GET", "/api/workflows/not-an-id", nil)
		require.Equal(t, http.StatusNotFound, r.Status)
	})

	t.Run("OtherOrganizationIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "mine", nil)
		other := wire.NewID(wire.Organization)
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/workflows/" + id, ""},
			{"PATCH", "/api/workflows/" + id, `{"name":"x"}`},
			{"DELETE", "/api/workflows/" + id, ""},
			{"POST", "/api/workflows/" + id + "/operations", `{"ops":[{"operation_type":"add","block_id":"a","type":"log"}]}`},
		} {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := b.doAs(t, other, c.method, c.path, body)
			require.Equal(t, http.StatusNotFound, r.Status, c.method)
			require.Equal(t, "not_found", r.Body["error"])
		}
		r := b.doAs(t, other, "GET", "/api/workflows", nil)
		require.Empty(t, r.Body["items"])
		// The same name is free in the other organization.
		r = b.doAs(t, other, "POST", "/api/workflows", map[string]any{"name": "mine"})
		require.Equal(t, http.StatusCreated, r.Status)
		r = b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Equal(t, 1, version(t, r), "nothing the other organization sent changed it")
	})

	t.Run("CreateWithDefinition", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		r := b.do(t, "POST", "/api/workflows", `{"name":"with-def","definition":{
		  "blocks":[{"block_id":"start","type":"trigger.manual","params":{}},{"block_id":"x","type":"http"},{"block_id":"l","type":"log","params":{"message":"hi"}}],
		  "edges":[{"block_id":"start","target_block_id":"l"},{"block_id":"x","target_block_id":"l"}]}}`)
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		require.Equal(t, 1, version(t, r))
		items := skipped(t, response{Status: 200, Body: r.Body, Raw: r.Raw})
		require.Len(t, items, 2)
		require.Equal(t, "block_type_not_registered", items[0]["reason_code"])
		require.Equal(t, float64(1), items[0]["operation_index"])
		require.Equal(t, "invalid_edge_source", items[1]["reason_code"])
		require.Equal(t, float64(4), items[1]["operation_index"], "edges count after blocks")
		def := r.Body["definition"].(map[string]any)
		require.Len(t, def["blocks"], 2)
		require.Equal(t, []any{map[string]any{"block_id": "start", "target_block_id": "l"}}, def["edges"])
		require.Empty(t, r.Body["validation_errors"])

		r = b.do(t, "POST", "/api/workflows", `{"name":"bad-def","definition":{"blocks":[{"block_id":"a","type":"log","target_block_id":"b"}]}}`)
		require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
		require.Equal(t, "invalid_body", r.Body["error"])
		require.Equal(t, "/definition/blocks/0/target_block_id", r.Body["issues"].([]any)[0].(map[string]any)["path"])
	})

	t.Run("Connectors", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		r := b.do(t, "GET", "/api/connectors", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.NotContains(t, r.Raw, "allow_private_network", "hidden params are never listed")
		require.NotContains(t, r.Raw, `"hidden"`)
		types := map[string]map[string]any{}
		for _, c := range r.Body["connectors"].([]any) {
			e := c.(map[string]any)
			types[e["type"].(string)] = e
			for _, k := range []string{"type", "category", "title", "description", "params", "output_schema", "retry_policy", "timeout_ms"} {
				require.Contains(t, e, k)
			}
		}
		for _, want := range []string{"trigger.manual", "trigger.webhook", "trigger.schedule", "http.request", "transform", "condition", "wait", "log", "fail"} {
			require.Contains(t, types, want)
		}
		props := types["http.request"]["params"].(map[string]any)["properties"].(map[string]any)
		require.Contains(t, props, "url")
		require.Equal(t, map[string]any{"max_attempts": float64(3), "initial_interval_ms": float64(100), "backoff_coefficient": float64(2), "max_interval_ms": float64(1000)},
			types["fail"]["retry_policy"])
	})

	t.Run("SummaryFormsAndVersionArithmetic", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "arith", nil)
		r := b.ops(t, id, pipeline)
		require.Empty(t, skipped(t, r))
		require.Equal(t, true, r.Body["ok"])
		require.Equal(t, 2, version(t, r), "one request that applied ops: +1, however many")
		require.Equal(t, "Applied all 7 operation(s) successfully.", r.Body["summary"])
		require.Empty(t, r.Body["validation_errors"])
		require.Equal(t, `"2"`, r.Header.Get("ETag"))

		r = b.ops(t, id, `[{"operation_type":"add","block_id":"n","type":"log","params":{"message":"x"}},{"operation_type":"add","block_id":"q","type":"nope"},{"operation_type":"connect","block_id":"q","target_block_id":"n"}]`)
		require.Len(t, skipped(t, r), 2)
		require.Equal(t, false, r.Body["ok"])
		require.Equal(t, 3, version(t, r))
		require.Equal(t, `Applied 1 operation(s). 2 skipped: #1 add "q": block_type_not_registered; #2 connect "q": invalid_edge_source.`, r.Body["summary"])

		r = b.ops(t, id, `[{"operation_type":"remove","block_id":"nope"}]`)
		require.Equal(t, 3, version(t, r), "nothing applied: the version stays")
		require.Equal(t, `Applied 0 operation(s). 1 skipped: #0 remove "nope": block_not_found.`, r.Body["summary"])

		r = b.ops(t, id, `[]`)
		require.Equal(t, 3, version(t, r))
		require.Equal(t, true, r.Body["ok"])
		require.Equal(t, "Applied all 0 operation(s) successfully.", r.Body["summary"])

		r = b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Equal(t, 3, version(t, r))
		require.Len(t, r.Body["definition"].(map[string]any)["blocks"], 5)
	})

	t.Run("IfMatch", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "ifmatch", nil)
		add := func(n int) string {
			return fmt.Sprintf(`[{"operation_type":"add","block_id":"b%d","type":"log","params":{"message":"m"}}]`, n)
		}
		for _, bad := range []string{"abc", "0", "-1", "1.5", `""`, "W/\"1\"", "*", " ", "+1"} {
			r := b.ops(t, id, add(0), "If-Match", bad)
			require.Equal(t, http.StatusBadRequest, r.Status, bad)
			require.Equal(t, "invalid_if_match", r.Body["error"], bad)
		}
		r := b.ops(t, id, add(1), "If-Match", "1")
		require.Equal(t, 2, version(t, r))
		r = b.ops(t, id, add(2), "If-Match", `"2"`)
		require.Equal(t, 3, version(t, r))
		r = b.ops(t, id, add(3), "If-Match", "2")
		require.Equal(t, http.StatusPreconditionFailed, r.Status)
		require.Equal(t, "version_mismatch", r.Body["error"])
		require.Equal(t, float64(3), r.Body["current"])
		r = b.ops(t, id, add(3), "If-Match", "99999999999999999999999")
		require.Equal(t, http.StatusPreconditionFailed, r.Status)
		r = b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Equal(t, 3, version(t, r), "refused requests applied nothing")
		require.Len(t, r.Body["definition"].(map[string]any)["blocks"], 2)
	})

	t.Run("InvalidBodyAppliesNothing", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "invalid", nil)
		many := make([]string, 501)
		for i := range many {
			many[i] = fmt.Sprintf(`{"operation_type":"add","block_id":"b%d","type":"log"}`, i)
		}
		for _, c := range []struct{ name, body, path string }{
			{"NotJSON", `{`, ""},
			{"NotObject", `[]`, ""},
			{"NoOps", `{}`, "/ops"},
			{"OpsNotArray", `{"ops":{}}`, "/ops"},
			{"OpsNull", `{"ops":null}`, "/ops"},
			{"TooMany", `{"ops":[` + strings.Join(many, ",") + `]}`, "/ops"},
			{"OpNotObject", `{"ops":[{"operation_type":"add","block_id":"a","type":"log"},3]}`, "/ops/1"},
			{"UnknownMember", `{"ops":[{"operation_type":"connect","block_id":"a","target":"b"}]}`, "/ops/0/target"},
			{"WrongType", `{"ops":[{"operation_type":"add","block_id":7,"type":"log"}]}`, "/ops/0/block_id"},
			{"ParamsNotObject", `{"ops":[{"operation_type":"add","block_id":"a","type":"log","params":"x"}]}`, "/ops/0/params"},
			{"ExtraTopLevel", `{"ops":[],"dry_run":true}`, "/dry_run"},
			// The JSON boundary (issue 12): values no run could hold, and ambiguous members.
			{"ParamOutOfRange", `{"ops":[{"operation_type":"add","block_id":"a","type":"transform","params":{"value":{"n":1e309}}}]}`, "/ops/0/params/value/n"},
			{"ParamLongInteger", `{"ops":[{"operation_type":"add","block_id":"a","type":"transform","params":{"value":123456789012345678901234567890}}]}`, "/ops/0/params/value"},
			{"DuplicateMember", `{"ops":[{"operation_type":"add","block_id":"a","block_id":"b","type":"log"}]}`, "/ops/0/block_id"},
			{"TooDeep", `{"ops":[{"operation_type":"add","block_id":"a","type":"transform","params":{"value":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}]}`, "/ops/0/params/value" + strings.Repeat("/0", 60)},
			{"InvalidUTF8", "{\"ops\":[{\"operation_type\":\"add\",\"block_id\":\"a\",\"type\":\"log\",\"params\":{\"message\":\"\xff\"}}]}", "/ops/0/params/message"},
		} {
			r := b.do(t, "POST", "/api/workflows/"+id+"/operations", c.body)
			require.Equal(t, http.StatusBadRequest, r.Status, c.name)
			require.Equal(t, "invalid_body", r.Body["error"], c.name)
			issues := r.Body["issues"].([]any)
			require.NotEmpty(t, issues, c.name)
			require.Equal(t, c.path, issues[0].(map[string]any)["path"], c.name)
		}
		r := b.do(t, "POST", "/api/workflows/"+id+"/operations", `{"ops":[{"operation_type":"connect","block_id":"a","target":"b"}]}`)
		require.Contains(t, r.Raw, `did you mean \"target_block_id\"`)
		r = b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Equal(t, 1, version(t, r))
		require.Empty(t, r.Body["definition"].(map[string]any)["blocks"])
	})

	t.Run("EveryReasonCode", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "reasons", nil)
		require.Empty(t, skipped(t, b.ops(t, id, pipeline)))
		for _, tc := range []struct {
			code    string
			op      string
			pointer string
			dym     string
			allowed []string
			reason  []string
		}{
			{"invalid_block_id", `{"operation_type":"add","block_id":"has space","type":"log"}`, "/block_id", "has_space", nil, []string{"^[A-Za-z0-9_-]{1,64}$"}},
			{"duplicate_block_id", `{"operation_type":"add","block_id":"fetch","type":"log"}`, "/block_id", "fetch_2", nil, []string{"already exists"}},
			{"block_type_not_registered", `{"operation_type":"add","block_id":"x","type":"http"}`, "/type", "http.request",
				[]string{"trigger.manual", "trigger.schedule", "trigger.webhook", "http.request", "fail", "log", "condition", "transform", "wait"},
				[]string{`Did you mean "http.request"?`, `Registered types: "trigger.manual"`, `"wait"`}},
			{"hidden_param_in_input", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"GET","url":"http://10.0.0.1","allow_private_network":true}}`, "/params/allow_private_network", "", nil, []string{"hidden"}},
			{"unknown_param", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"GET","uri":"https://a"}}`, "/params/uri", "url", nil, []string{`no param "uri"`, `"url"`}},
			{"invalid_param", `{"operation_type":"update","block_id":"fetch","params":{"method":"FETCH"}}`, "/params/method", "",
				[]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}, []string{"/params/method", "rule: enum", `"GET"`}},
			{"block_not_found", `{"operation_type":"update","block_id":"fech","params":{}}`, "/block_id", "fetch", nil, []string{"never existed"}},
			{"invalid_edge_source", `{"operation_type":"connect","block_id":"ghost","target_block_id":"ok"}`, "/block_id", "", nil, []string{"never existed"}},
			{"invalid_edge_target", `{"operation_type":"connect","block_id":"ok","target_block_id":"ghost"}`, "/target_block_id", "", nil, nil},
			{"self_loop", `{"operation_type":"connect","block_id":"ok","target_block_id":"ok"}`, "/target_block_id", "", nil, nil},
			{"duplicate_edge", `{"operation_type":"connect","block_id":"start","target_block_id":"fetch"}`, "/target_block_id", "", nil, nil},
			{"edge_creates_cycle", `{"operation_type":"connect","block_id":"ok","target_block_id":"start"}`, "/target_block_id", "", nil, []string{"start -> fetch -> check -> ok"}},
			{"invalid_branch", `{"operation_type":"connect","block_id":"check","target_block_id":"start"}`, "/branch", "", []string{"true", "false"}, nil},
			{"edge_not_found", `{"operation_type":"disconnect","block_id":"start","target_block_id":"ok"}`, "/target_block_id", "", []string{"fetch"}, nil},
			{"unknown_operation_type", `{"operation_type":"delete","block_id":"ok"}`, "/operation_type", "", []string{"add", "update", "remove", "connect", "disconnect"}, nil},
		} {
			t.Run(tc.code, func(t *testing.T) {
				r := b.ops(t, id, `[{"operation_type":"add","block_id":"pad","type":"log","params":{"message":"p"}},`+tc.op+`]`)
				items := skipped(t, r)
				require.Len(t, items, 1, r.Raw)
				s := items[0]
				require.Equal(t, tc.code, s["reason_code"], s["reason"])
				require.Equal(t, float64(1), s["operation_index"])
				require.NotEmpty(t, s["operation_type"])
				require.Contains(t, s, "block_id")
				hint, _ := s["hint"].(map[string]any)
				require.Equal(t, tc.pointer, hint["pointer"], s["reason"])
				if tc.dym != "" {
					require.Equal(t, tc.dym, hint["did_you_mean"], s["reason"])
				}
				for _, a := range tc.allowed {
					require.Contains(t, hint["allowed"], a, s["reason"])
				}
				for _, want := range tc.reason {
					require.Contains(t, s["reason"], want)
				}
				// Undo the padding so every case sees the same graph.
				require.Empty(t, skipped(t, b.ops(t, id, `[{"operation_type":"remove","block_id":"pad"}]`)))
			})
		}
	})

	t.Run("EdgeSourceSkippedEarlierInTheBatch", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "seed-rule-4", nil)
		r := b.ops(t, id, `[
		 {"operation_type":"add","block_id":"start","type":"trigger.manual"},
		 {"operation_type":"add","block_id":"slack","type":"slack.post","params":{"text":"x"}},
		 {"operation_type":"connect","block_id":"start","target_block_id":"slack"},
		 {"operation_type":"connect","block_id":"slack","target_block_id":"start"}]`)
		items := skipped(t, r)
		require.Len(t, items, 3)
		require.Equal(t, "block_type_not_registered", items[0]["reason_code"])
		require.Equal(t, "invalid_edge_target", items[1]["reason_code"])
		require.Equal(t, "invalid_edge_source", items[2]["reason_code"])
		require.Contains(t, items[2]["reason"], "(operation 1 of this batch) was skipped with block_type_not_registered")
	})

	t.Run("EveryValidationCode", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "validation", nil)
		r := b.ops(t, id, `[
		 {"operation_type":"add","block_id":"l0","type":"log","params":{"message":"x"}}]`)
		require.Contains(t, validationCodes(t, r), "no_trigger")

		r = b.ops(t, id, `[
		 {"operation_type":"add","block_id":"start","type":"trigger.manual"},
		 {"operation_type":"add","block_id":"hook","type":"trigger.webhook"},
		 {"operation_type":"connect","block_id":"l0","target_block_id":"start"},
		 {"operation_type":"add","block_id":"w","type":"wait"},
		 {"operation_type":"connect","block_id":"start","target_block_id":"w"},
		 {"operation_type":"add","block_id":"late","type":"log","params":{"message":"x"}},
		 {"operation_type":"add","block_id":"a","type":"log","params":{"message":"{{ steps.late.output.message }} {{ inptu.x }}"}},
		 {"operation_type":"connect","block_id":"start","target_block_id":"a"},
		 {"operation_type":"connect","block_id":"start","target_block_id":"late"},
		 {"operation_type":"add","block_id":"c","type":"condition","params":{"expression":"input.n >"}},
		 {"operation_type":"connect","block_id":"start","target_block_id":"c"}]`)
		require.Empty(t, skipped(t, r))
		codes := validationCodes(t, r)
		for code, block := range map[string]string{
			"multiple_triggers":         "hook",
			"trigger_has_incoming_edge": "start",
			"unreachable_block":         "l0",
			"missing_required_param":    "w",
			"unknown_reference":         "a",
			"invalid_expression":        "c",
		} {
			require.Contains(t, codes, code)
			require.Equal(t, block, codes[code]["block_id"], code)
			require.NotEmpty(t, codes[code]["message"])
		}
		require.Contains(t, codes["unknown_reference"]["message"], "steps.late")
		require.Contains(t, codes["unknown_reference"]["message"], `"a"`)
		require.Equal(t, "/params/message", codes["unknown_reference"]["pointer"])
		require.Equal(t, "/params/expression", codes["invalid_expression"]["pointer"])

		r = b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Len(t, r.Body["validation_errors"], len(validationCodes(t, r))+countDuplicates(r))
	})

	t.Run("ConcurrentPatchesWithOneIfMatch", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "race", nil)
		const n = 20
		results := make([]response, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-gate
				results[i] = b.ops(t, id, fmt.Sprintf(`[{"operation_type":"add","block_id":"writer%d","type":"log","params":{"message":"%d"}}]`, i, i), "If-Match", "1")
			})
		}
		close(gate)
		wg.Wait()
		winner := -1
		for i, r := range results {
			switch r.Status {
			case http.StatusOK:
				require.Equal(t, -1, winner, "exactly one patch applies")
				winner = i
				require.Equal(t, 2, version(t, r))
			case http.StatusPreconditionFailed:
				require.Equal(t, "version_mismatch", r.Body["error"])
				require.Equal(t, float64(2), r.Body["current"])
			default:
				t.Fatalf("unexpected %d: %s", r.Status, r.Raw)
			}
		}
		require.NotEqual(t, -1, winner)
		r := b.do(t, "GET", "/api/workflows/"+id, nil)
		require.Equal(t, 2, version(t, r))
		require.Equal(t, map[string]any{
			"blocks": []any{map[string]any{"block_id": fmt.Sprintf("writer%d", winner), "type": "log", "params": map[string]any{"message": fmt.Sprint(winner)}}},
			"edges":  []any{},
		}, r.Body["definition"], "the stored definition is the winner's result")
	})

	t.Run("InternalAPI", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		id := b.create(t, "dispatch-me", nil)
		require.Empty(t, skipped(t, b.ops(t, id, pipeline)))
		client := editorv1connect.NewEditorServiceClient(&http.Client{Transport: internalauth.Transport{
			Signer: sys.signer, Service: "run-orchestrator", Base: http.DefaultTransport, Now: time.Now,
		}}, sys.url)
		for _, req := range []*editorv1.GetWorkflowRequest{
			{OrganizationId: b.org, Key: &editorv1.GetWorkflowRequest_Id{Id: id}},
			{OrganizationId: b.org, Key: &editorv1.GetWorkflowRequest_Name{Name: "dispatch-me"}},
		} {
			resp, err := client.GetWorkflow(t.Context(), connect.NewRequest(req))
			require.NoError(t, err)
			wf := resp.Msg.GetWorkflow()
			require.NotNil(t, wf)
			require.Equal(t, id, wf.GetId())
			require.Equal(t, b.org, wf.GetOrganizationId())
			require.Equal(t, "dispatch-me", wf.GetName())
			require.Equal(t, int64(2), wf.GetVersion())
			require.Empty(t, wf.GetValidationErrors())
			got := b.do(t, "GET", "/api/workflows/"+id, nil)
			def, err := json.Marshal(got.Body["definition"])
			require.NoError(t, err)
			require.JSONEq(t, string(def), wf.GetDefinitionJson())
		}
		for _, req := range []*editorv1.GetWorkflowRequest{
			{OrganizationId: wire.NewID(wire.Organization), Key: &editorv1.GetWorkflowRequest_Id{Id: id}},
			{OrganizationId: wire.NewID(wire.Organization), Key: &editorv1.GetWorkflowRequest_Name{Name: "dispatch-me"}},
			{OrganizationId: b.org, Key: &editorv1.GetWorkflowRequest_Name{Name: "nope"}},
			{OrganizationId: b.org},
		} {
			resp, err := client.GetWorkflow(t.Context(), connect.NewRequest(req))
			require.NoError(t, err)
			require.NotNil(t, resp.Msg.GetNotFound())
		}
		// Unsigned callers are refused.
		unsigned := editorv1connect.NewEditorServiceClient(http.DefaultClient, sys.url)
		_, err := unsigned.GetWorkflow(t.Context(), connect.NewRequest(&editorv1.GetWorkflowRequest{OrganizationId: b.org}))
		require.Error(t, err)
	})
}

// countDuplicates counts validation errors beyond the first of each code.
func countDuplicates(r response) int {
	seen := map[string]bool{}
	dup := 0
	for _, it := range r.Body["validation_errors"].([]any) {
		c := it.(map[string]any)["code"].(string)
		if seen[c] {
			dup++
		}
		seen[c] = true
	}
	return dup
}
