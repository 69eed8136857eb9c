package fuzz

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
)

// ---------------------------------------------------------------------------------------
// Valid requests: every parameter and body member from the document's schema, with real ids
// of this system where a member names a resource.

// sendValid sends a valid request of op; for the destructive ones it first makes the
// resource to destroy (workflows, schedules, keys, sessions are never the fixtures).
func (f *fuzzer) sendValid(r *rand.Rand, op *operation) {
	req := f.buildValid(r, op, true)
	res := f.send(req)
	f.learn(req, res)
}

// learn keeps the ids a valid request created, for later requests to use.
func (f *fuzzer) learn(req *request, res *result) {
	if req.Op == nil || res.Err != nil || res.Status >= 300 {
		return
	}
	var m map[string]any
	if json.Unmarshal(res.Body, &m) != nil {
		return
	}
	x := f.fx
	switch req.Op.ID {
	case "createWorkflow":
		if id := str(m, "id"); id != "" && len(x.editable) < 40 {
			x.add(&x.editable, id)
		}
	case "startRun":
		if id := str(m, "runId"); id != "" {
			x.add(&x.runs, id)
			if strings.Contains(req.Path, x.waitWF) {
				x.add(&x.waiting, id)
			}
		}
	case "createSchedule":
		if id := str(m, "id"); id != "" {
			x.add(&x.schedules, id)
		}
	case "authOrganizationInviteMember":
		if id := str(m, "id"); id != "" {
			x.add(&x.invites, id)
		}
	}
}

// try sends a helper request of a valid flow (making the resource a DELETE destroys) and
// returns its JSON; it is checked and counted like every request.
func (f *fuzzer) try(method, path string, cred func(http.Header), body any) map[string]any {
	req := &request{Kind: "valid", Method: method, Path: path, Header: http.Header{}, Op: f.opFor(method, path)}
	if cred != nil {
		cred(req.Header)
	}
	if body != nil {
		req.Body, _ = json.Marshal(body)
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Origin", testOrigin)
	}
	res := f.send(req)
	var m map[string]any
	if res.Err == nil && res.Status < 300 {
		_ = json.Unmarshal(res.Body, &m)
	}
	return m
}

func (f *fuzzer) allWorkflows() []string {
	x := f.fx
	x.mu.Lock()
	defer x.mu.Unlock()
	out := append([]string{x.invalidWF, x.hookWF}, x.runnable...)
	return append(out, x.editable...)
}

// pathValue is a real id for a path parameter. side says the request may first create what
// it destroys; without it, DELETEs get a throwaway made earlier.
func (f *fuzzer) pathValue(r *rand.Rand, op *operation, name string, side bool) string {
	x := f.fx
	own := bearer(x.token)
	switch op.ID {
	case "getWorkflow", "listWorkflowRuns":
		return f.fx.pick(r, f.allWorkflows())
	case "describeWorkflow", "editWorkflow":
		return x.pick(r, x.editable)
	case "deleteWorkflow":
		if side {
			if id := str(f.try(http.MethodPost, "/api/workflows", own, map[string]any{"name": "fz-del-" + alnum(r, 10, letters)}), "id"); id != "" {
				return id
			}
		} else if id, ok := x.take(&x.trashWF); ok {
			return id
		}
		return "wf_missing" + alnum(r, 8, letters)
	case "startRun":
		if side && r.IntN(8) == 0 {
			return x.invalidWF
		}
		if r.IntN(4) == 0 {
			return x.waitWF
		}
		return x.runnable[0]
	case "getRun", "getRunLogs":
		return x.pick(r, x.runs)
	case "cancelRun":
		if side && r.IntN(2) == 0 {
			if id := str(f.try(http.MethodPost, "/api/workflows/"+x.waitWF+"/run", own, nil), "runId"); id != "" {
				x.add(&x.runs, id)
				return id
			}
		}
		return x.pick(r, x.runs)
	case "signalRun":
		if side && r.IntN(2) == 0 {
			if id := str(f.try(http.MethodPost, "/api/workflows/"+x.waitWF+"/run", own, nil), "runId"); id != "" {
				x.add(&x.runs, id)
				return id
			}
		}
		if r.IntN(3) > 0 {
			return x.pick(r, x.waiting)
		}
		return x.pick(r, x.runs)
	case "getSchedule", "updateSchedule":
		return x.pick(r, x.schedules)
	case "deleteSchedule":
		if side {
			if id := str(f.try(http.MethodPost, "/api/schedules", own, map[string]any{"workflowId": x.runnable[0], "cron": "@yearly"}), "id"); id != "" {
				return id
			}
		} else if id, ok := x.take(&x.trashSchedule); ok {
			return id
		}
		return "sch_missing" + alnum(r, 8, letters)
	case "authApiKeyRevoke":
		return f.keyToDelete(r, side)
	case "deliverStandardWebhook":
		return knownPatterns["^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"](r)
	}
	return alnum(r, 8, letters)
}

func (f *fuzzer) keyToDelete(r *rand.Rand, side bool) string {
	x := f.fx
	if side {
		if id := str(f.try(http.MethodPost, "/api/auth/api-key/create", bearer(x.token), map[string]any{"name": "fz-del"}), "id"); id != "" {
			return id
		}
	} else if id, ok := x.take(&x.trashKey); ok {
		return id
	}
	return "key_missing" + alnum(r, 8, letters)
}

// listOps are the operations with ?after= and ?limit=.
func maxLimit(op *operation) int {
	if op.ID == "getRunLogs" {
		return 1000
	}
	return 500
}

func (f *fuzzer) queryValue(r *rand.Rand, op *operation, p param) (string, bool) {
	x := f.fx
	switch p.Name {
	case "after":
		x.mu.Lock()
		c, ok := x.cursors[op.ID]
		x.mu.Unlock()
		// A cursor is bound to its list's scope: only the list it came from takes it.
		if !ok || op.ID == "listWorkflowRuns" || op.ID == "getRunLogs" {
			return "", false
		}
		return c, true
	case "limit":
		return fmt.Sprint([]int{1, 2, 10, 50, maxLimit(op)}[r.IntN(5)]), true
	case "workflowId":
		return f.fx.pick(r, f.allWorkflows()), true
	case "organizationId":
		if strings.HasPrefix(op.Path, "/api/auth/api-key/") {
			return x.orgID, true
		}
		return x.pick(r, x.u2Orgs), true
	}
	return fmt.Sprint(valid(r, p.Schema, "", nil, 0)), true
}

// credStyle sets the main organization's credentials in one of the ways the guard accepts.
func (f *fuzzer) credStyle(r *rand.Rand, h http.Header) {
	x := f.fx
	switch r.IntN(5) {
	case 0:
		h.Set("Authorization", "Bearer "+x.token)
	case 1:
		h.Set("Authorization", "Bearer "+x.signed)
	case 2:
		// The console's cookie, sent as a browser sends it from a page of the trusted origin
		// (a write authenticated by the cookie needs that Origin).
		h.Set("Cookie", "svc.session_token="+url.QueryEscape(x.signed))
		h.Set("Origin", testOrigin)
	case 3:
		h.Set("X-Api-Key", x.key)
	default:
		h.Set("Authorization", "Bearer "+x.key)
	}
}

// authCred is who calls an auth-layer operation: key management is the main owner's session,
// organization management the other owner's (its active organization may come and go),
// password changes and sign-outs a user of their own.
func (f *fuzzer) authCred(r *rand.Rand, op *operation, side bool, h http.Header) {
	x := f.fx
	switch op.ID {
	case "authApiKeyCreate", "authApiKeyList", "authApiKeyDelete", "authApiKeyRevoke", "authApiKeyVerify":
		h.Set("Authorization", "Bearer "+x.token)
	case "authChangePassword", "authOrganizationAcceptInvitation":
		x.mu.Lock()
		h.Set("Authorization", "Bearer "+x.u3Token)
		x.mu.Unlock()
	case "authSignOut":
		if side {
			// A fresh session to end (sign-in is limited to 10 a minute: then none).
			if tok := str(f.try(http.MethodPost, "/api/auth/sign-in/email", nil, map[string]any{"email": x.u3Email, "password": password}), "token"); tok != "" {
				h.Set("Authorization", "Bearer "+tok)
			}
		}
	case "authSignUpEmail", "authSignInEmail", "authRequestPasswordReset", "authResetPassword":
	default:
		h.Set("Authorization", "Bearer "+x.u2Token)
	}
}

func (f *fuzzer) buildValid(r *rand.Rand, op *operation, side bool) *request {
	req := &request{Op: op, Kind: "valid", Method: op.Method, Header: http.Header{}}
	p := op.Path
	for _, pp := range op.param("path") {
		p = strings.Replace(p, "{"+pp.Name+"}", escape(f.pathValue(r, op, pp.Name, side)), 1)
	}
	var q []string
	for _, qp := range op.param("query") {
		if r.IntN(2) == 0 {
			if v, ok := f.queryValue(r, op, qp); ok {
				q = append(q, url.QueryEscape(qp.Name)+"="+url.QueryEscape(v))
			}
		}
	}
	// Cursors are bound to their list's filters; the ones kept were issued without any.
	if len(q) > 1 {
		var kept []string
		filtered := false
		for _, kv := range q {
			if !strings.HasPrefix(kv, "after=") && !strings.HasPrefix(kv, "limit=") {
				filtered = true
			}
		}
		for _, kv := range q {
			if !filtered || !strings.HasPrefix(kv, "after=") {
				kept = append(kept, kv)
			}
		}
		q = kept
	}
	req.Path = p
	if len(q) > 0 {
		req.Path += "?" + strings.Join(q, "&")
	}
	switch {
	case op.auth():
		f.authCred(r, op, side, req.Header)
	case !op.Open:
		f.credStyle(r, req.Header)
	}
	if op.auth() || op.ID == "bootstrap" {
		if op.mutating() {
			req.Header.Set("Origin", testOrigin)
		}
	}
	for _, hp := range op.param("header") {
		switch hp.Name {
		case "Idempotency-Key":
			if r.IntN(3) == 0 {
				req.Header.Set(hp.Name, "fz-"+alnum(r, 16, letters))
			}
		case "If-Match":
			if side && r.IntN(3) == 0 {
				if v := f.version(strings.TrimPrefix(req.Path, "/api/workflows/")); v != "" {
					req.Header.Set(hp.Name, v)
				}
			}
		}
	}
	if op.Body != nil && (op.BodyRequired || r.IntN(4) > 0) {
		v, ok := f.hint(r, op, side)("", op.Body)
		if !ok {
			v = valid(r, op.Body, "", f.hint(r, op, side), 0)
		}
		req.obj, _ = v.(map[string]any)
		req.Body, _ = json.Marshal(v)
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(op.Path, "/api/webhooks/") {
		sign(req, "fz-"+alnum(r, 16, letters))
	}
	return req
}

// version reads a workflow's ETag, for a valid If-Match.
func (f *fuzzer) version(id string) string {
	id = strings.SplitN(id, "/", 2)[0]
	req := &request{Kind: "valid", Method: http.MethodGet, Path: "/api/workflows/" + id, Header: http.Header{}}
	req.Op = f.opFor(req.Method, req.Path)
	req.Header.Set("Authorization", "Bearer "+f.fx.token)
	res := f.send(req)
	if res.Err != nil || res.Status != http.StatusOK {
		return ""
	}
	return res.Header.Get("ETag")
}

var (
	crons     = []string{"0 0 1 1 *", "@yearly", "30 2 * * *", "*/15 * * * *", "@hourly", "5 4 * * sun"}    //nolint:gochecknoglobals // test data
	timezones = []string{"UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe"} //nolint:gochecknoglobals // test data
)

// hint gives members that name resources or must be unique their real values.
func (f *fuzzer) hint(r *rand.Rand, op *operation, side bool) hintFunc {
	x := f.fx
	return func(name string, sch map[string]any) (any, bool) {
		switch name {
		case "name":
			switch op.ID {
			case "createWorkflow", "describeWorkflow":
				return "fz-" + alnum(r, 12, letters), true
			case "signalRun":
				return []string{"go", "go", "other"}[r.IntN(3)], true
			case "authApiKeyCreate":
				return "fz-" + alnum(r, 6, letters), true
			}
		case "definition":
			if r.IntN(4) == 0 {
				return nil, false // from the schema: mostly unknown types, reported as skipped
			}
			typ, params := safeBlock(r)
			return def(block("start", "trigger.manual", map[string]any{}), block("b1", typ, params)), true
		case "ops":
			return validOps(r), true
		case "input", "payload":
			return anyJSON(r, 3), true
		case "":
			if isWebhook(op) { // the event: any object
				obj := map[string]any{"type": "fz." + alnum(r, 5, letters)}
				for range r.IntN(4) {
					obj[alnum(r, 1+r.IntN(8), letters)] = anyJSON(r, 2)
				}
				return obj, true
			}
		case "idempotencyKey":
			return "fz-" + alnum(r, 16, letters), true
		case "workflowId":
			return x.runnable[r.IntN(len(x.runnable))], true
		case "cron":
			return crons[r.IntN(len(crons))], true
		case "timezone":
			return timezones[r.IntN(len(timezones))], true
		case "email":
			switch op.ID {
			case "authSignInEmail":
				return x.u3Email, true
			case "authRequestPasswordReset", "authOrganizationInviteMember":
				if r.IntN(3) == 0 {
					return x.u3Email, true
				}
			}
			return "fz-" + strings.ToLower(alnum(r, 12, letters)) + "@example.com", true
		case "password", "currentPassword", "newPassword":
			return password, true
		case "revokeOtherSessions":
			return false, true
		case "token":
			return alnum(r, 32, letters), true
		case "slug":
			return "fz-" + strings.ToLower(alnum(r, 10, "abcdefghijklmnopqrstuvwxyz0123456789")), true
		case "organizationId":
			if op.ID == "authApiKeyCreate" {
				return x.orgID, true
			}
			if op.ID == "authOrganizationSetActive" && r.IntN(6) == 0 {
				return nil, true
			}
			return x.pick(r, x.u2Orgs), true
		case "organizationSlug":
			return x.pick(r, x.u2Slugs), true
		case "keepCurrentActiveOrganization":
			return r.IntN(4) > 0, true
		case "invitationId":
			return x.pick(r, x.invites), true
		case "memberIdOrEmail":
			if r.IntN(3) == 0 {
				return x.u3Email, true
			}
			return "fz-" + strings.ToLower(alnum(r, 8, letters)) + "@example.com", true
		case "keyId":
			return f.keyToDelete(r, side), true
		case "key":
			if r.IntN(4) == 0 {
				return x.revokedKey, true
			}
			return x.key, true
		case "expiresIn":
			return 3600 + r.IntN(100000), true
		case "redirectTo":
			return "/reset", true
		}
		return nil, false
	}
}

// safeBlock is a block type with valid params that runs without the network and ends soon
// (or waits for a signal).
func safeBlock(r *rand.Rand) (string, map[string]any) {
	switch r.IntN(5) {
	case 0:
		return "log", map[string]any{"message": "m " + alnum(r, 5, letters)}
	case 1:
		return "transform", map[string]any{"value": anyJSON(r, 2)}
	case 2:
		return "condition", map[string]any{"expression": "input.n > 5"}
	case 3:
		return "wait", map[string]any{"signal": "go"}
	default:
		return "fail", map[string]any{"message": "boom", "fail_attempts": 1}
	}
}

// validOps is a batch that applies to a fixture-shaped workflow (a trigger block "start").
func validOps(r *rand.Rand) []any {
	id := "b" + alnum(r, 8, letters)
	typ, params := safeBlock(r)
	ops := []any{
		map[string]any{"operation_type": "add", "block_id": id, "type": typ, "params": params},
		map[string]any{"operation_type": "connect", "block_id": "start", "target_block_id": id},
	}
	switch r.IntN(4) {
	case 0:
		ops = append(ops, map[string]any{"operation_type": "disconnect", "block_id": "start", "target_block_id": id},
			map[string]any{"operation_type": "remove", "block_id": id})
	case 1:
		_, p2 := safeBlock(r)
		ops = append(ops, map[string]any{"operation_type": "update", "block_id": id, "params": p2})
	case 2:
		ops = append(ops, map[string]any{"operation_type": "remove", "block_id": id})
	}
	return ops
}

// ---------------------------------------------------------------------------------------
// Boundary values and hostile JSON.

// rawNumbers are numbers at and past the edges of what a JSON reader holds.
var rawNumbers = []string{"0", "-1", "-0", "1.5", "1e309", "-1e400", "123456789012345678901234567890", "9007199254740993", "1e-400", "-9223372036854775809", "18446744073709551616"} //nolint:gochecknoglobals // test data

// numberHeld reports whether a 64-bit float holds the number token as written: not past
// float64's range (1e309), not a non-zero number that becomes 0 (1e-400), not an integer
// literal past ±2^53 (wire.CheckJSON refuses the others: they would silently change).
func numberHeld(tok string) bool {
	switch tok {
	case "1e309", "-1e400", "1e-400", "123456789012345678901234567890", "9007199254740993", "-9223372036854775809", "18446744073709551616":
		return false
	}
	return true
}

func deepArray(n int) string  { return strings.Repeat("[", n) + strings.Repeat("]", n) }
func deepObject(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

// hostileStrings are string values at the edges: lengths around the limits, unicode, NUL.
func hostileString(r *rand.Rand, sch map[string]any) (string, string) {
	mx := intOf(sch["maxLength"], 200)
	switch r.IntN(12) {
	case 0:
		return "", "empty"
	case 1:
		return strings.Repeat("a", mx), fmt.Sprintf("max-%d", mx)
	case 2:
		return strings.Repeat("b", mx+1), fmt.Sprintf("max+1-%d", mx+1)
	case 3:
		return strings.Repeat("c", 200), "200"
	case 4:
		return strings.Repeat("d", 201), "201"
	case 5:
		return strings.Repeat("é", mx), "max-multibyte"
	case 6:
		return "nul\x00inside", "nul"
	case 7:
		return "\u202eRTL 😀 \ufeff zero\u200bwidth", "unicode"
	case 8:
		return strings.Repeat("x", 64<<10), "64KiB"
	case 9:
		return "../../etc/passwd' OR 1=1 --", "injection"
	case 10:
		return "{{ input }}{{ run.id }}${jndi:ldap://x}", "template"
	default:
		return "   ", "blank"
	}
}

// request body helpers

// setMember replaces (or adds) member name of the request's object body with a JSON text.
func setMember(req *request, name, rawJSON string) {
	obj := map[string]any{}
	for k, v := range req.obj {
		obj[k] = v
	}
	obj[name] = "__FZ_RAW__"
	b, _ := json.Marshal(obj)
	req.Body = bytes.Replace(b, []byte(`"__FZ_RAW__"`), []byte(rawJSON), 1)
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
}

func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// cursorOf makes a cursor in the shape this system issues ({k, s, p}, base64url JSON) with
// content the endpoint never issued.
func forgedCursor(v any) string {
	return base64.RawURLEncoding.EncodeToString([]byte(marshal(v)))
}

func queryEscape(s string) string { return url.QueryEscape(s) }
