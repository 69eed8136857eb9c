package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestEditor walks the workflows API (and the operations batch endpoint) through the gateway
// only, with real credentials: each subtest signs up its own user (its own organization).
// Bodies are sent as raw JSON so malformed ones reach the editor as written.
func TestEditor(t *testing.T) {
	t.Parallel()
	// The reason-code walk alone is ~50 requests from one principal: lift the default 60/min.
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"})

	t.Run("Unauthenticated", func(t *testing.T) {
		t.Parallel()
		r := newClient(t, sys).get("/api/workflows")
		require.Equal(t, http.StatusUnauthorized, r.Status, r.Raw)
		r = newClient(t, sys).get("/api/connectors")
		require.Equal(t, http.StatusUnauthorized, r.Status, r.Raw)
	})

	t.Run("CreateGetListDescribeDelete", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-crud")
		r := u.send("POST", "/api/workflows", `{"name":"first","description":"d"}`)
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		id, _ := r.Body["id"].(string)
		require.Regexp(t, `^wf_`, id)
		require.Equal(t, 1, edVersion(t, r))
		require.Equal(t, `"1"`, r.Header.Get("ETag"))
		require.Equal(t, "first", r.Body["name"])
		require.Equal(t, "d", r.Body["description"])
		require.Equal(t, map[string]any{"blocks": []any{}, "edges": []any{}}, r.Body["definition"])
		require.Equal(t, []any{}, r.Body["skipped_items"])
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, r.Body["createdAt"])
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, r.Body["updatedAt"])
		require.Equal(t, "no_trigger", obj(t, arr(t, r.Body["validation_errors"])[0])["code"])

		// Name 1–200 characters and unique per organization.
		requireError(t, u.send("POST", "/api/workflows", `{"name":"first"}`), http.StatusConflict, "workflow_name_taken")
		r = u.send("POST", "/api/workflows", `{"name":"`+strings.Repeat("n", 200)+`"}`)
		require.Equal(t, http.StatusCreated, r.Status, "200 characters is allowed: %s", r.Raw)
		for _, bad := range []string{`{}`, `{"name":""}`, `{"name":"   "}`, `{"name":"` + strings.Repeat("x", 201) + `"}`, `{"name":"x","extra":1}`, `[]`} {
			r = u.send("POST", "/api/workflows", bad)
			requireError(t, r, http.StatusBadRequest, "invalid_body")
			require.NotEmpty(t, r.Body["issues"], bad)
		}
		second := u.create("second", "")
		third := u.create("third", "")

		r = u.c.get("/api/workflows/" + id)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, `"1"`, r.Header.Get("ETag"))
		for _, k := range []string{"id", "name", "description", "version", "definition", "validation_errors", "createdAt", "updatedAt"} {
			require.Contains(t, r.Body, k)
		}
		require.Equal(t, "first", r.Body["name"])

		// Newest first, without definitions, two per page; the 200-character one sits between.
		r = u.c.get("/api/workflows?limit=2")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		items := objs(t, r.Body["items"])
		require.Len(t, items, 2)
		require.Equal(t, third, items[0]["id"])
		require.Equal(t, second, items[1]["id"])
		for _, it := range items {
			require.NotContains(t, it, "definition")
		}
		cursor, _ := r.Body["nextCursor"].(string)
		require.NotEmpty(t, cursor, r.Raw)
		r = u.c.get("/api/workflows?limit=2" + afterQuery(cursor))
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		items = objs(t, r.Body["items"])
		require.Len(t, items, 2)
		require.Equal(t, strings.Repeat("n", 200), items[0]["name"])
		require.Equal(t, id, items[1]["id"])
		cursor, _ = r.Body["nextCursor"].(string)
		if cursor != "" {
			r = u.c.get("/api/workflows?limit=2" + afterQuery(cursor))
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			require.Empty(t, r.Body["items"])
		}
		r = u.c.get("/api/workflows")
		require.Len(t, objs(t, r.Body["items"]), 4, "default limit 50 holds them all")
		require.Nil(t, r.Body["nextCursor"], r.Raw)
		for _, q := range []string{"limit=0", "limit=501", "limit=x", "limit=-1", "after=nope"} {
			requireError(t, u.c.get("/api/workflows?"+q), http.StatusBadRequest, "invalid_query")
		}
		r = u.c.get("/api/workflows?limit=500")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)

		// PATCH name/description bumps the version and honours If-Match.
		r = u.send("PATCH", "/api/workflows/"+id, `{"name":"renamed"}`, "If-Match", `"1"`)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 2, edVersion(t, r))
		require.Equal(t, "renamed", r.Body["name"])
		require.Equal(t, "d", r.Body["description"])
		r = u.send("PATCH", "/api/workflows/"+id, `{"description":"new"}`, "If-Match", "1")
		requireError(t, r, http.StatusPreconditionFailed, "version_mismatch")
		require.EqualValues(t, 2, r.Body["current"])
		requireError(t, u.send("PATCH", "/api/workflows/"+id, `{"description":"new"}`, "If-Match", "two"), http.StatusBadRequest, "invalid_if_match")
		requireError(t, u.send("PATCH", "/api/workflows/"+id, `{"name":"second"}`), http.StatusConflict, "workflow_name_taken")
		r = u.send("PATCH", "/api/workflows/"+id, `{"description":"new"}`, "If-Match", "2")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 3, edVersion(t, r))
		require.Equal(t, "new", r.Body["description"])
		r = u.c.get("/api/workflows/" + id)
		require.Equal(t, `"3"`, r.Header.Get("ETag"))
		require.Equal(t, "renamed", r.Body["name"])

		r = u.c.do("DELETE", "/api/workflows/"+id, nil)
		require.Equal(t, http.StatusNoContent, r.Status, r.Raw)
		require.Empty(t, r.Raw)
		requireError(t, u.c.get("/api/workflows/"+id), http.StatusNotFound, "not_found")
		requireError(t, u.c.do("DELETE", "/api/workflows/"+id, nil), http.StatusNotFound, "not_found")
		requireError(t, u.c.get("/api/workflows/not-an-id"), http.StatusNotFound, "not_found")
		require.NotContains(t, u.c.get("/api/workflows").Raw, id)
	})

	t.Run("OtherOrganizationIsNotFound", func(t *testing.T) {
		t.Parallel()
		a, b := newEditorUser(t, sys, "ed-org-a"), newEditorUser(t, sys, "ed-org-b")
		id := a.create("mine", "")
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/workflows/" + id, ""},
			{"PATCH", "/api/workflows/" + id, `{"name":"x"}`},
			{"DELETE", "/api/workflows/" + id, ""},
			{"POST", "/api/workflows/" + id + "/operations", `{"ops":[{"operation_type":"add","block_id":"a","type":"log","params":{"message":"m"}}]}`},
		} {
			requireError(t, b.send(c.method, c.path, c.body), http.StatusNotFound, "not_found")
		}
		r := b.c.get("/api/workflows")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Empty(t, r.Body["items"])
		// The same name is free in the other organization.
		r = b.send("POST", "/api/workflows", `{"name":"mine"}`)
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		r = a.c.get("/api/workflows/" + id)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 1, edVersion(t, r), "nothing the other organization sent changed it")
		require.Equal(t, "mine", r.Body["name"])
		require.Empty(t, obj(t, r.Body["definition"])["blocks"])
	})

	t.Run("CreateWithDefinition", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-def")
		r := u.send("POST", "/api/workflows", `{"name":"with-def","definition":{
		  "blocks":[{"block_id":"start","type":"trigger.manual","params":{}},{"block_id":"x","type":"http"},{"block_id":"l","type":"log","params":{"message":"hi"}}],
		  "edges":[{"block_id":"start","target_block_id":"l"},{"block_id":"x","target_block_id":"l"}]}}`)
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		require.Equal(t, 1, edVersion(t, r))
		require.Equal(t, `"1"`, r.Header.Get("ETag"))
		items := objs(t, r.Body["skipped_items"])
		require.Len(t, items, 2, r.Raw)
		require.Equal(t, "block_type_not_registered", items[0]["reason_code"])
		require.EqualValues(t, 1, items[0]["operation_index"])
		require.Equal(t, "add", items[0]["operation_type"])
		require.Equal(t, "x", items[0]["block_id"])
		require.Equal(t, "invalid_edge_source", items[1]["reason_code"])
		require.EqualValues(t, 4, items[1]["operation_index"], "edges count after blocks")
		require.Equal(t, "connect", items[1]["operation_type"])
		def := obj(t, r.Body["definition"])
		require.Len(t, def["blocks"], 2)
		require.Equal(t, []any{map[string]any{"block_id": "start", "target_block_id": "l"}}, def["edges"])
		require.Empty(t, r.Body["validation_errors"])
		g := u.c.get("/api/workflows/" + r.Body["id"].(string))
		require.Equal(t, def, g.Body["definition"])

		r = u.send("POST", "/api/workflows", `{"name":"bad-def","definition":{"blocks":[{"block_id":"a","type":"log","target_block_id":"b"}]}}`)
		requireError(t, r, http.StatusBadRequest, "invalid_body")
		require.Equal(t, "/definition/blocks/0/target_block_id", obj(t, arr(t, r.Body["issues"])[0])["path"])
		r = u.c.get("/api/workflows")
		require.Len(t, objs(t, r.Body["items"]), 1, "the refused create stored nothing")
	})

	t.Run("ConnectorsHideHiddenParams", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-conn")
		r := u.c.get("/api/connectors")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.NotContains(t, r.Raw, "allow_private_network", "hidden params are never listed")
		require.NotContains(t, r.Raw, `"hidden"`)
		types := map[string]map[string]any{}
		for _, e := range objs(t, r.Body["connectors"]) {
			types[e["type"].(string)] = e
			for _, k := range []string{"type", "category", "title", "description", "params", "output_schema", "retry_policy", "timeout_ms"} {
				require.Contains(t, e, k, e["type"])
			}
			require.Contains(t, []string{"trigger", "action", "logic", "wait"}, e["category"], e["type"])
		}
		for _, want := range []string{"trigger.manual", "trigger.webhook", "trigger.schedule", "http.request", "transform", "condition", "wait", "log", "fail"} {
			require.Contains(t, types, want)
		}
		props := obj(t, obj(t, types["http.request"]["params"])["properties"])
		for _, p := range []string{"method", "url", "headers", "query", "body", "timeout_ms"} {
			require.Contains(t, props, p)
		}
		require.NotContains(t, props, "allow_private_network")
		require.Equal(t, map[string]any{"max_attempts": float64(3), "initial_interval_ms": float64(100), "backoff_coefficient": float64(2), "max_interval_ms": float64(1000)},
			types["fail"]["retry_policy"])

		// Setting the hidden param is skipped, on add and on update; the block is never stored with it.
		id := u.create("hidden", "")
		r = u.ops(id, `[
		 {"operation_type":"add","block_id":"h","type":"http.request","params":{"method":"GET","url":"http://10.0.0.1","allow_private_network":true}},
		 {"operation_type":"add","block_id":"ok","type":"http.request","params":{"method":"GET","url":"https://example.com"}},
		 {"operation_type":"update","block_id":"ok","params":{"allow_private_network":true}}]`)
		items := edSkipped(t, r)
		require.Len(t, items, 2, r.Raw)
		for i, s := range items {
			require.Equal(t, "hidden_param_in_input", s["reason_code"], r.Raw)
			require.Equal(t, "/params/allow_private_network", obj(t, s["hint"])["pointer"])
			require.Contains(t, s["reason"], "hidden")
			require.EqualValues(t, []int{0, 2}[i], s["operation_index"])
		}
		require.Equal(t, "h", items[0]["block_id"])
		require.Equal(t, "ok", items[1]["block_id"])
		g := u.c.get("/api/workflows/" + id)
		require.NotContains(t, g.Raw, "allow_private_network")
		require.Len(t, obj(t, g.Body["definition"])["blocks"], 1)
	})

	t.Run("SummaryFormsAndVersionArithmetic", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-arith")
		id := u.create("arith", "")
		r := u.ops(id, edPipeline)
		require.Empty(t, edSkipped(t, r))
		require.Equal(t, true, r.Body["ok"])
		require.Equal(t, 2, edVersion(t, r), "one request that applied ops: +1, however many")
		require.Equal(t, "Applied all 7 operation(s) successfully.", r.Body["summary"])
		require.Empty(t, r.Body["validation_errors"])

		r = u.ops(id, `[{"operation_type":"add","block_id":"n","type":"log","params":{"message":"x"}},{"operation_type":"add","block_id":"q","type":"nope"},{"operation_type":"connect","block_id":"q","target_block_id":"n"}]`)
		require.Len(t, edSkipped(t, r), 2)
		require.Equal(t, false, r.Body["ok"])
		require.Equal(t, 3, edVersion(t, r))
		require.Equal(t, `Applied 1 operation(s). 2 skipped: #1 add "q": block_type_not_registered; #2 connect "q": invalid_edge_source.`, r.Body["summary"])

		// An all-skipped batch leaves the version unchanged.
		r = u.ops(id, `[{"operation_type":"remove","block_id":"nope"},{"operation_type":"add","block_id":"start","type":"log"}]`)
		require.Len(t, edSkipped(t, r), 2)
		require.Equal(t, false, r.Body["ok"])
		require.Equal(t, 3, edVersion(t, r), "nothing applied: the version stays")
		require.Equal(t, `Applied 0 operation(s). 2 skipped: #0 remove "nope": block_not_found; #1 add "start": duplicate_block_id.`, r.Body["summary"])

		r = u.ops(id, `[]`)
		require.Equal(t, 3, edVersion(t, r))
		require.Equal(t, true, r.Body["ok"])
		require.Equal(t, "Applied all 0 operation(s) successfully.", r.Body["summary"])

		r = u.ops(id, `[{"operation_type":"remove","block_id":"n"},{"operation_type":"add","block_id":"n2","type":"log","params":{"message":"y"}}]`)
		require.Equal(t, 4, edVersion(t, r))
		require.Equal(t, "Applied all 2 operation(s) successfully.", r.Body["summary"])

		r = u.c.get("/api/workflows/" + id)
		require.Equal(t, 4, edVersion(t, r))
		require.Equal(t, `"4"`, r.Header.Get("ETag"))
		require.Len(t, obj(t, r.Body["definition"])["blocks"], 5)
	})

	t.Run("IfMatch", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-ifmatch")
		id := u.create("ifmatch", "")
		add := func(n int) string {
			return fmt.Sprintf(`[{"operation_type":"add","block_id":"b%d","type":"log","params":{"message":"m"}}]`, n)
		}
		for _, bad := range []string{"abc", "0", "-1", "1.5", `""`, `W/"1"`, "*", "+1"} {
			requireError(t, u.ops(id, add(0), "If-Match", bad), http.StatusBadRequest, "invalid_if_match")
		}
		r := u.ops(id, add(1), "If-Match", "1")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 2, edVersion(t, r))
		r = u.ops(id, add(2), "If-Match", `"2"`)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 3, edVersion(t, r))
		// Both spellings of the current version 3.
		r = u.ops(id, `[]`, "If-Match", `"3"`)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		r = u.ops(id, `[]`, "If-Match", "3")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, 3, edVersion(t, r))
		for _, stale := range []string{"2", `"1"`, "4", "99999999999999999999999"} {
			r = u.ops(id, add(3), "If-Match", stale)
			requireError(t, r, http.StatusPreconditionFailed, "version_mismatch")
			require.EqualValues(t, 3, r.Body["current"], stale)
		}
		r = u.c.get("/api/workflows/" + id)
		require.Equal(t, 3, edVersion(t, r), "refused requests applied nothing")
		require.Len(t, obj(t, r.Body["definition"])["blocks"], 2)
	})

	t.Run("InvalidBodyAppliesNothing", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-body")
		id := u.create("invalid", "")
		many := make([]string, 501)
		for i := range many {
			many[i] = fmt.Sprintf(`{"operation_type":"add","block_id":"b%d","type":"log","params":{"message":"m"}}`, i)
		}
		for _, c := range []struct{ name, body, path string }{
			{"NotJSON", `{`, ""},
			{"NotObject", `[]`, ""},
			{"NoOps", `{}`, "/ops"},
			{"OpsNotArray", `{"ops":{}}`, "/ops"},
			{"OpsString", `{"ops":"add"}`, "/ops"},
			{"OpsNull", `{"ops":null}`, "/ops"},
			{"TooMany", `{"ops":[` + strings.Join(many, ",") + `]}`, "/ops"},
			{"OpNotObject", `{"ops":[{"operation_type":"add","block_id":"a","type":"log"},3]}`, "/ops/1"},
			{"UnknownMember", `{"ops":[{"operation_type":"connect","block_id":"a","target":"b"}]}`, "/ops/0/target"},
			{"WrongType", `{"ops":[{"operation_type":"add","block_id":7,"type":"log"}]}`, "/ops/0/block_id"},
			{"ParamsNotObject", `{"ops":[{"operation_type":"add","block_id":"a","type":"log","params":"x"}]}`, "/ops/0/params"},
			{"ExtraTopLevel", `{"ops":[],"dry_run":true}`, "/dry_run"},
		} {
			r := u.send("POST", "/api/workflows/"+id+"/operations", c.body)
			requireError(t, r, http.StatusBadRequest, "invalid_body")
			issues := arr(t, r.Body["issues"])
			require.NotEmpty(t, issues, c.name)
			require.Equal(t, c.path, obj(t, issues[0])["path"], c.name)
		}
		r := u.send("POST", "/api/workflows/"+id+"/operations", `{"ops":[{"operation_type":"connect","block_id":"a","target":"b"}]}`)
		require.Contains(t, r.Raw, `did you mean \"target_block_id\"`)
		// Exactly 500 is allowed.
		r = u.ops(id, `[`+strings.Join(many[:500], ",")+`]`, "If-Match", "1")
		require.Equal(t, http.StatusOK, r.Status, "500 ops are allowed")
		require.Equal(t, 2, edVersion(t, r))
		r = u.send("POST", "/api/workflows/"+id+"/operations", `{"ops":[`+strings.Join(many, ",")+`]}`)
		requireError(t, r, http.StatusBadRequest, "invalid_body")
		r = u.c.get("/api/workflows/" + id)
		require.Equal(t, 2, edVersion(t, r), "only the 500-op batch applied")
		require.Len(t, obj(t, r.Body["definition"])["blocks"], 500)
	})

	t.Run("EveryReasonCode", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-reasons")
		id := u.create("reasons", "")
		require.Empty(t, edSkipped(t, u.ops(id, edPipeline)))
		allTypes := []string{"trigger.manual", "trigger.schedule", "trigger.webhook", "http.request", "fail", "log", "condition", "json.validate", "transform", "wait"}
		for _, tc := range []struct {
			code, op, opType, block, pointer, dym string
			allowed, reason                       []string
		}{
			{"invalid_block_id", `{"operation_type":"add","block_id":"has space","type":"log"}`, "add", "has space", "/block_id", "has_space", nil, []string{"^[A-Za-z0-9_-]{1,64}$"}},
			{"duplicate_block_id", `{"operation_type":"add","block_id":"fetch","type":"log"}`, "add", "fetch", "/block_id", "fetch_2", nil, []string{"already exists"}},
			{"block_type_not_registered", `{"operation_type":"add","block_id":"x","type":"http"}`, "add", "x", "/type", "http.request",
				allTypes, append([]string{`Did you mean "http.request"?`, `Registered types: `}, quoteAll(allTypes)...)},
			{"hidden_param_in_input", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"GET","url":"http://10.0.0.1","allow_private_network":true}}`, "add", "x", "/params/allow_private_network", "", nil, []string{"hidden"}},
			{"unknown_param", `{"operation_type":"add","block_id":"x","type":"http.request","params":{"method":"GET","uri":"https://a"}}`, "add", "x", "/params/uri", "url", nil, []string{`no param "uri"`, `"url"`}},
			{"invalid_param", `{"operation_type":"update","block_id":"fetch","params":{"method":"FETCH"}}`, "update", "fetch", "/params/method", "",
				[]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}, []string{"/params/method", "rule: enum", `"GET"`}},
			{"invalid_param_did_you_mean", `{"operation_type":"update","block_id":"fetch","params":{"method":"get"}}`, "update", "fetch", "/params/method", "GET", nil, []string{"/params/method"}},
			{"block_not_found", `{"operation_type":"update","block_id":"fech","params":{}}`, "update", "fech", "/block_id", "fetch", nil, []string{"never existed"}},
			{"block_not_found_remove", `{"operation_type":"remove","block_id":"ghost"}`, "remove", "ghost", "/block_id", "", nil, nil},
			{"invalid_edge_source", `{"operation_type":"connect","block_id":"ghost","target_block_id":"ok"}`, "connect", "ghost", "/block_id", "", nil, []string{"never existed"}},
			{"invalid_edge_target", `{"operation_type":"connect","block_id":"ok","target_block_id":"ghost"}`, "connect", "ok", "/target_block_id", "", nil, nil},
			{"self_loop", `{"operation_type":"connect","block_id":"ok","target_block_id":"ok"}`, "connect", "ok", "/target_block_id", "", nil, nil},
			{"duplicate_edge", `{"operation_type":"connect","block_id":"start","target_block_id":"fetch"}`, "connect", "start", "/target_block_id", "", nil, nil},
			{"edge_creates_cycle", `{"operation_type":"connect","block_id":"ok","target_block_id":"start"}`, "connect", "ok", "/target_block_id", "", nil, []string{"start -> fetch -> check -> ok"}},
			{"invalid_branch", `{"operation_type":"connect","block_id":"check","target_block_id":"start"}`, "connect", "check", "/branch", "", []string{"true", "false"}, nil},
			{"invalid_branch_on_action", `{"operation_type":"connect","block_id":"fetch","target_block_id":"ok","branch":"true"}`, "connect", "fetch", "/branch", "", nil, nil},
			{"edge_not_found", `{"operation_type":"disconnect","block_id":"start","target_block_id":"ok"}`, "disconnect", "start", "/target_block_id", "", []string{"fetch"}, nil},
			{"unknown_operation_type", `{"operation_type":"delete","block_id":"ok"}`, "delete", "ok", "/operation_type", "remove", []string{"add", "update", "remove", "connect", "disconnect"}, nil},
		} {
			t.Run(tc.code, func(t *testing.T) {
				code, _, _ := strings.Cut(tc.code, "_did_you_mean")
				code = strings.TrimSuffix(strings.TrimSuffix(code, "_remove"), "_on_action")
				r := u.ops(id, `[{"operation_type":"add","block_id":"pad","type":"log","params":{"message":"p"}},`+tc.op+`]`)
				items := edSkipped(t, r)
				require.Len(t, items, 1, r.Raw)
				require.Equal(t, false, r.Body["ok"])
				s := items[0]
				require.Equal(t, code, s["reason_code"], s["reason"])
				require.EqualValues(t, 1, s["operation_index"])
				require.Equal(t, tc.opType, s["operation_type"])
				require.Equal(t, tc.block, s["block_id"])
				require.NotEmpty(t, s["reason"])
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
				require.Contains(t, r.Body["summary"], fmt.Sprintf(`1 skipped: #1 %s %q: %s.`, tc.opType, tc.block, code))
				// Undo the padding so every case sees the same graph.
				require.Empty(t, edSkipped(t, u.ops(id, `[{"operation_type":"remove","block_id":"pad"}]`)))
			})
		}
		g := u.c.get("/api/workflows/" + id)
		require.Len(t, obj(t, g.Body["definition"])["blocks"], 4, "every skip left the pipeline as it was")
		require.Len(t, obj(t, g.Body["definition"])["edges"], 3)
	})

	t.Run("EdgeSourceSkippedEarlierInTheBatch", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-seed4")
		id := u.create("seed-rule-4", "")
		r := u.ops(id, `[
		 {"operation_type":"add","block_id":"start","type":"trigger.manual"},
		 {"operation_type":"add","block_id":"slack","type":"slack.post","params":{"text":"x"}},
		 {"operation_type":"connect","block_id":"start","target_block_id":"slack"},
		 {"operation_type":"connect","block_id":"slack","target_block_id":"start"},
		 {"operation_type":"add","block_id":"gone","type":"log","params":{"message":"m"}},
		 {"operation_type":"remove","block_id":"gone"},
		 {"operation_type":"connect","block_id":"gone","target_block_id":"start"}]`)
		items := edSkipped(t, r)
		require.Len(t, items, 4, r.Raw)
		require.Equal(t, "block_type_not_registered", items[0]["reason_code"])
		require.Equal(t, "invalid_edge_target", items[1]["reason_code"])
		require.Equal(t, "invalid_edge_source", items[2]["reason_code"])
		require.Contains(t, items[2]["reason"], "(operation 1 of this batch) was skipped with block_type_not_registered")
		require.Equal(t, "invalid_edge_source", items[3]["reason_code"])
		require.Contains(t, items[3]["reason"], "removed")
	})

	t.Run("EveryValidationCode", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-valid")
		id := u.create("validation", "")
		r := u.ops(id, `[{"operation_type":"add","block_id":"l0","type":"log","params":{"message":"x"}}]`)
		require.Empty(t, edSkipped(t, r))
		require.Contains(t, edValidation(t, r), "no_trigger", r.Raw)
		require.NotEmpty(t, edValidation(t, r)["no_trigger"]["message"])

		r = u.ops(id, `[
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
		require.Empty(t, edSkipped(t, r))
		require.Equal(t, true, r.Body["ok"], "validation errors are not skips")
		codes := edValidation(t, r)
		require.NotContains(t, codes, "no_trigger")
		for code, block := range map[string]string{
			"multiple_triggers":         "hook",
			"trigger_has_incoming_edge": "start",
			"unreachable_block":         "l0",
			"missing_required_param":    "w",
			"unknown_reference":         "a",
			"invalid_expression":        "c",
		} {
			require.Contains(t, codes, code, r.Raw)
			require.Equal(t, block, codes[code]["block_id"], code)
			require.NotEmpty(t, codes[code]["message"], code)
		}
		require.Contains(t, codes["unknown_reference"]["message"], "steps.late")
		require.Contains(t, codes["unknown_reference"]["message"], `"a"`)
		require.Equal(t, "/params/message", codes["unknown_reference"]["pointer"])
		require.Equal(t, "/params/expression", codes["invalid_expression"]["pointer"])

		// The same errors on every read, and a condition wrapped in {{ }} is invalid_expression.
		g := u.c.get("/api/workflows/" + id)
		require.Equal(t, r.Body["validation_errors"], g.Body["validation_errors"])
		r = u.ops(id, `[{"operation_type":"update","block_id":"c","params":{"expression":"{{ input.n > 1 }}"}}]`)
		require.Empty(t, edSkipped(t, r))
		e := edValidation(t, r)["invalid_expression"]
		require.Equal(t, "c", e["block_id"], r.Raw)
		require.Equal(t, "input.n > 1", e["did_you_mean"], r.Raw)
	})

	t.Run("ConcurrentPatchesWithOneIfMatch", func(t *testing.T) {
		t.Parallel()
		u := newEditorUser(t, sys, "ed-race")
		id := u.create("race", "")
		const n = 20
		results := make([]response, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-gate
				results[i] = u.ops(id, fmt.Sprintf(`[{"operation_type":"add","block_id":"writer%d","type":"log","params":{"message":"%d"}}]`, i, i), "If-Match", `"1"`)
			})
		}
		close(gate)
		wg.Wait()
		winner, refused := -1, 0
		for i, r := range results {
			switch r.Status {
			case http.StatusOK:
				require.Equal(t, -1, winner, "exactly one patch applies")
				winner = i
				require.Equal(t, 2, edVersion(t, r))
				require.Empty(t, edSkipped(t, r))
			case http.StatusPreconditionFailed:
				refused++
				require.Equal(t, "version_mismatch", r.Body["error"], r.Raw)
				require.EqualValues(t, 2, r.Body["current"], r.Raw)
			default:
				t.Fatalf("unexpected %d: %s", r.Status, r.Raw)
			}
		}
		require.NotEqual(t, -1, winner)
		require.Equal(t, n-1, refused)
		r := u.c.get("/api/workflows/" + id)
		require.Equal(t, 2, edVersion(t, r))
		require.Equal(t, `"2"`, r.Header.Get("ETag"))
		want := map[string]any{
			"blocks": []any{map[string]any{"block_id": fmt.Sprintf("writer%d", winner), "type": "log", "params": map[string]any{"message": fmt.Sprint(winner)}}},
			"edges":  []any{},
		}
		require.Equal(t, want, r.Body["definition"], "the stored definition is the winner's result")
	})
}

const edPipeline = `[
 {"operation_type":"add","block_id":"start","type":"trigger.manual"},
 {"operation_type":"add","block_id":"fetch","type":"http.request","params":{"method":"GET","url":"https://example.com/{{ input.path }}"}},
 {"operation_type":"add","block_id":"check","type":"condition","params":{"expression":"steps.fetch.output.status == 200"}},
 {"operation_type":"add","block_id":"ok","type":"log","params":{"message":"got {{ steps.fetch.output.body }}"}},
 {"operation_type":"connect","block_id":"start","target_block_id":"fetch"},
 {"operation_type":"connect","block_id":"fetch","target_block_id":"check"},
 {"operation_type":"connect","block_id":"check","target_block_id":"ok","branch":"true"}
]`

// editorUser is one signed-up user (its own organization) speaking to the editor through the gateway.
type editorUser struct {
	t *testing.T
	c *client
}

func newEditorUser(t *testing.T, sys *harness.System, prefix string) *editorUser {
	t.Helper()
	return &editorUser{t: t, c: signUp(t, sys, prefix).c}
}

// send sends body as written (raw JSON, possibly malformed) with the user's session.
func (u *editorUser) send(method, path, body string, hdr ...string) response {
	u.t.Helper()
	h := []string{"Origin", u.c.origin, "Authorization", "Bearer " + u.c.token}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		h = append(h, "Content-Type", "application/json")
	}
	return call(u.t, method, u.c.base+path, rd, append(h, hdr...)...)
}

// create makes a workflow from a raw definition ("" for none) and returns its id.
func (u *editorUser) create(name, definition string) string {
	u.t.Helper()
	body := fmt.Sprintf(`{"name":%q}`, name)
	if definition != "" {
		body = fmt.Sprintf(`{"name":%q,"definition":%s}`, name, definition)
	}
	r := u.send("POST", "/api/workflows", body)
	require.Equal(u.t, http.StatusCreated, r.Status, r.Raw)
	id, _ := r.Body["id"].(string)
	require.NotEmpty(u.t, id, r.Raw)
	return id
}

func (u *editorUser) ops(id, ops string, hdr ...string) response {
	u.t.Helper()
	return u.send("POST", "/api/workflows/"+id+"/operations", `{"ops":`+ops+`}`, hdr...)
}

// edSkipped checks a 200 patch answer's shape and returns its skipped items.
func edSkipped(t *testing.T, r response) []map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	for _, k := range []string{"ok", "version", "validation_errors", "skipped_items", "summary"} {
		require.Contains(t, r.Body, k, r.Raw)
	}
	items := objs(t, r.Body["skipped_items"])
	require.Equal(t, len(items) == 0, r.Body["ok"], "ok is true exactly when nothing was skipped: %s", r.Raw)
	return items
}

// edValidation returns the first validation error of each code.
func edValidation(t *testing.T, r response) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, e := range objs(t, r.Body["validation_errors"]) {
		code, _ := e["code"].(string)
		if _, seen := out[code]; !seen {
			out[code] = e
		}
	}
	return out
}

func edVersion(t *testing.T, r response) int {
	t.Helper()
	v, ok := r.Body["version"].(float64)
	require.True(t, ok, "no version: %d %s", r.Status, r.Raw)
	return int(v)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
