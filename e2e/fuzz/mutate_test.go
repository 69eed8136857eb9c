package fuzz

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// mutation turns a valid request into a malformed or hostile one, and says what the contract
// makes of it when that is definite.
type mutation struct {
	name string
	// reject: meant to be refused, so the rejected-only phase uses it.
	reject  bool
	applies func(op *operation) bool
	apply   func(f *fuzzer, r *rand.Rand, req *request)
	// resign: a webhook delivery is signed again after the change (a hostile body that is
	// correctly signed reaches the parser).
	resign bool
}

func expect(status int, why string, codes ...string) *expectation {
	return &expectation{Status: status, Codes: codes, Why: why}
}

func isWebhook(op *operation) bool { return strings.HasPrefix(op.Path, "/api/webhooks/") }

// svcBody: a body read by a service in the service shape (not the auth layer, not the closed
// bootstrap, whose 404 comes first).
func svcBody(op *operation) bool { return op.Body != nil && !op.auth() && op.ID != "bootstrap" }

func guarded(op *operation) bool { return !op.Open }

// boundary is what the JSON boundary (wire.CheckJSON, applied to every JSON body a client
// sends: web.Decode, identity's decoder, webhook bodies) makes of a value it refuses: 400
// invalid_body, or VALIDATION_ERROR in the auth layer.
func boundary(op *operation, why string) *expectation {
	switch {
	case svcBody(op):
		return expect(400, why, "invalid_body")
	case op.auth() && op.Body != nil:
		return expect(400, why, "VALIDATION_ERROR")
	}
	return nil
}

func hasParam(op *operation, name string) bool {
	for _, p := range op.Params {
		if p.Name == name {
			return true
		}
	}
	return false
}

func hasPathParam(op *operation) bool { return len(op.param("path")) > 0 }

func typedProps(op *operation) []string {
	var out []string
	for _, k := range sortedKeys(props(op.Body)) {
		if len(types(props(op.Body)[k])) > 0 {
			out = append(out, k)
		}
	}
	return out
}

func stringProps(op *operation, withMax bool) []string {
	var out []string
	ps := props(op.Body)
	for _, k := range sortedKeys(ps) {
		ts := types(ps[k])
		if containsStr(ts, "string") && (!withMax || ps[k]["maxLength"] != nil) {
			out = append(out, k)
		}
	}
	return out
}

func anyOf[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// member picks a member of the body to change: one the schema names, or a new one.
func member(r *rand.Rand, op *operation) string {
	names := sortedKeys(props(op.Body))
	if len(names) == 0 || r.IntN(5) == 0 {
		return "fz_member"
	}
	return anyOf(r, names)
}

func stripCreds(h http.Header) {
	h.Del("Authorization")
	h.Del("Cookie")
	h.Del("X-Api-Key")
}

// mutations is the catalog.
func mutations() []mutation {
	return []mutation{
		// --- credentials -------------------------------------------------------------------
		{name: "no-credentials", reject: true, applies: guarded, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			stripCreds(req.Header)
			req.Expect = expect(401, "a guarded route without credentials", "unauthorized")
		}},
		{name: "garbage-credentials", reject: true, applies: guarded, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			stripCreds(req.Header)
			x := f.fx
			switch r.IntN(12) {
			case 0:
				req.Header.Set("Authorization", "Bearer "+alnum(r, 1+r.IntN(40), letters))
			case 1:
				req.Header.Set("Authorization", "Bearer")
			case 2:
				req.Header.Set("Authorization", "Basic dXNlcjpwYXNzd29yZA==")
			case 3:
				req.Header.Set("Authorization", "Bearer svc_"+alnum(r, 64, letters[:52]))
			case 4:
				req.Header.Set("Authorization", "Bearer "+x.token+"x")
			case 5:
				req.Header.Set("Authorization", "Bearer "+strings.Repeat("A", 16<<10))
			case 6:
				req.Header.Set("Cookie", "svc.session_token="+alnum(r, 32, letters)+".c2lnbmF0dXJl")
				req.Header.Set("Origin", testOrigin) // from the trusted page: judged as a credential
			case 7:
				tampered := []byte(x.signed)
				tampered[len(tampered)-3] ^= 1
				req.Header.Set("Cookie", "svc.session_token="+string(tampered))
				req.Header.Set("Origin", testOrigin)
			case 8:
				req.Header.Set("X-Api-Key", "svc_")
			case 9:
				req.Header.Set("X-Api-Key", x.revokedKey)
			case 10:
				req.Header.Set("Authorization", "Bearer "+x.revokedKey)
			default:
				req.Header.Set("Authorization", "Bearer "+x.token[:len(x.token)/2]+"\u00e9\u00e9")
			}
			req.Expect = expect(401, "invalid, unknown or revoked credentials", "unauthorized")
		}},
		// --- the auth layer's Origin check -------------------------------------------------
		{name: "origin", reject: true, applies: func(op *operation) bool { return op.auth() && op.mutating() }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			switch r.IntN(5) {
			case 0:
				req.Header.Del("Origin")
				req.Expect = expect(403, "no Origin", "MISSING_OR_NULL_ORIGIN")
			case 1:
				req.Header.Set("Origin", "null")
				req.Expect = expect(403, "Origin null", "MISSING_OR_NULL_ORIGIN")
			case 2:
				req.Header.Set("Origin", "http://evil.example")
			case 3:
				req.Header.Set("Origin", "fuzz.test")
			default:
				req.Header.Set("Origin", testOrigin+".evil.example")
			}
			if req.Expect == nil {
				req.Expect = expect(403, "untrusted Origin", "INVALID_ORIGIN")
			}
		}},
		// --- cross-site writes with the session cookie (issue 21) ---------------------------
		{name: "cookie-cross-site", reject: true, applies: func(op *operation) bool { return guarded(op) && op.mutating() }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			stripCreds(req.Header)
			req.Header.Set("Cookie", "svc.session_token="+url.QueryEscape(f.fx.signed))
			switch r.IntN(4) {
			case 0:
				req.Header.Set("Origin", "http://evil.example")
			case 1:
				req.Header.Set("Origin", testOrigin+".evil.example")
			case 2:
				req.Header.Del("Origin")
				req.Header.Set("Sec-Fetch-Site", "cross-site")
			default:
				req.Header.Del("Origin")
				req.Header.Set("Sec-Fetch-Site", "same-site")
			}
			req.Expect = expect(403, "a write authenticated by the cookie from an untrusted page", "invalid_origin")
		}},
		// --- webhook signatures ------------------------------------------------------------
		{name: "webhook-signature", reject: true, applies: isWebhook, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			if req.Op.ID == "deliverGitHubWebhook" {
				switch r.IntN(4) {
				case 0:
					req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
				case 1:
					req.Header.Set("X-Hub-Signature-256", "sha1=abc")
				case 2:
					req.Header.Del("X-Hub-Signature-256")
				default:
					req.Header.Set("X-Hub-Signature-256", githubSig(append([]byte(" "), req.Body...)))
				}
			} else {
				id, ts := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp")
				switch r.IntN(7) {
				case 0:
					req.Header.Set("webhook-signature", standardSig(id, ts, req.Body, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes!!!!!!"))))
				case 1:
					old := strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)
					req.Header.Set("webhook-timestamp", old)
					req.Header.Set("webhook-signature", standardSig(id, old, req.Body, stdSecret))
				case 2:
					future := strconv.FormatInt(time.Now().Add(6*time.Minute).Unix(), 10)
					req.Header.Set("webhook-timestamp", future)
					req.Header.Set("webhook-signature", standardSig(id, future, req.Body, stdSecret))
				case 3:
					req.Header.Del("webhook-id")
					req.Header.Del("webhook-timestamp")
					req.Header.Del("webhook-signature")
				case 4:
					req.Header.Set("webhook-timestamp", "abc")
				case 5:
					req.Header.Set("webhook-signature", "v1,"+alnum(r, 44, letters))
				default:
					req.Header.Set("webhook-id", id+"x")
				}
			}
			req.Expect = expect(401, "a missing, malformed, wrong or stale signature", "invalid_signature")
		}},
		{name: "webhook-headers", reject: true, applies: isWebhook, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			if req.Op.ID == "deliverGitHubWebhook" && r.IntN(2) == 0 {
				req.Header.Del(anyOf(r, []string{"X-GitHub-Delivery", "X-GitHub-Event"}))
				req.Expect = expect(400, "a required header missing", "webhook_rejected")
				return
			}
			// Not application/json: the body is the empty object (docs/API.md, Webhooks) and a correctly
			// signed delivery dispatches; nothing definite to expect beyond no 5xx.
			req.Header.Set("Content-Type", anyOf(r, []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "multipart/form-data; boundary=x"}))
		}},
		// --- body members --------------------------------------------------------------------
		{name: "missing-required", reject: true, applies: func(op *operation) bool { return op.Body != nil && len(requiredOf(op.Body)) > 0 }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			m := anyOf(r, requiredOf(req.Op.Body))
			obj := map[string]any{}
			for k, v := range req.obj {
				if k != m {
					obj[k] = v
				}
			}
			req.Body = []byte(marshal(obj))
			req.Header.Set("Content-Type", "application/json")
			if svcBody(req.Op) {
				req.Expect = expect(400, "required member "+m+" missing", "invalid_body", "invalid_cron")
			}
		}},
		{name: "wrong-type", reject: true, applies: func(op *operation) bool { return op.Body != nil && len(typedProps(op)) > 0 }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			m := anyOf(r, typedProps(req.Op))
			v, ok := wrongType(r, props(req.Op.Body)[m])
			if !ok {
				return
			}
			setMember(req, m, marshal(v))
			switch {
			case svcBody(req.Op):
				req.Expect = expect(400, "member "+m+" of the wrong type", "invalid_body")
			case req.Op.auth():
				req.Expect = expect(400, "member "+m+" of the wrong type", "VALIDATION_ERROR")
			}
		}},
		{name: "extra-member", reject: true, applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			setMember(req, "zz_"+alnum(r, 4, letters), marshal(anyJSON(r, 1)))
			if svcBody(req.Op) && closed(req.Op.Body) {
				req.Expect = expect(400, "a member the schema does not have (additionalProperties: false)", "invalid_body")
			}
		}},
		{name: "boundary-string", applies: func(op *operation) bool { return op.Body != nil && len(stringProps(op, false)) > 0 }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			m := anyOf(r, stringProps(req.Op, false))
			sch := props(req.Op.Body)[m]
			s, label := hostileString(r, sch)
			req.Kind += ":" + label
			setMember(req, m, marshal(s))
			if label == "nul" {
				req.Expect = boundary(req.Op, "a string with U+0000")
				return
			}
			if svcBody(req.Op) {
				if mx, ok := sch["maxLength"]; ok && utf8.RuneCountInString(s) > intOf(mx, 0) {
					req.Expect = expect(400, fmt.Sprintf("%s longer than maxLength %v", m, mx), "invalid_body", "invalid_cron")
				}
				if s == "" && intOf(sch["minLength"], 0) > 0 {
					req.Expect = expect(400, m+" shorter than minLength", "invalid_body")
				}
			}
		}},
		{name: "over-max-string", reject: true, applies: func(op *operation) bool { return svcBody(op) && len(stringProps(op, true)) > 0 }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			m := anyOf(r, stringProps(req.Op, true))
			mx := intOf(props(req.Op.Body)[m]["maxLength"], 0)
			setMember(req, m, marshal(strings.Repeat(anyOf(r, []string{"a", "é", "😀"}), mx+1)))
			req.Expect = expect(400, fmt.Sprintf("%s of %d characters, maxLength %d", m, mx+1, mx), "invalid_body", "invalid_cron")
		}},
		{name: "number", applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			tok := anyOf(r, rawNumbers)
			m := member(r, req.Op)
			req.Kind += ":" + tok
			setMember(req, m, tok)
			if !numberHeld(tok) {
				req.Expect = boundary(req.Op, "a number no 64-bit float holds exactly ("+tok+"): refused, not stored")
			}
		}},
		{name: "number-out-of-range", reject: true, applies: svcBody, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			tok := anyOf(r, []string{"1e309", "-1e400", "1e-400", "123456789012345678901234567890", "9007199254740993"})
			m := member(r, req.Op)
			if r.IntN(2) == 0 {
				// Deep inside a member of any JSON (input, payload, params, the event).
				setMember(req, m, `{"n":[1,{"deep":`+tok+`}]}`)
			} else {
				setMember(req, m, tok)
			}
			req.Expect = expect(400, "a number no 64-bit float holds exactly ("+tok+"): refused, not stored", "invalid_body")
		}},
		{name: "deep-nesting", reject: true, applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			n := anyOf(r, []int{65, 9999, 10000, 10001, 100000})
			nest := deepArray
			if r.IntN(2) == 0 {
				nest = deepObject
			}
			req.Kind += ":" + strconv.Itoa(n)
			req.Expect = boundary(req.Op, fmt.Sprintf("JSON nested %d levels, past the boundary's %d", n, 64))
			if r.IntN(3) == 0 {
				req.Body = []byte(nest(n))
				req.Header.Set("Content-Type", "application/json")
				return
			}
			setMember(req, member(r, req.Op), nest(n))
		}},
		{name: "duplicate-keys", reject: true, applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			m := member(r, req.Op)
			setMember(req, m, marshal(anyJSON(r, 1)))
			dup := fmt.Sprintf(`{%q:%s,`, m, marshal(anyJSON(r, 1)))
			req.Body = append([]byte(dup), req.Body[1:]...)
			req.Expect = boundary(req.Op, "an object with the same member twice")
		}},
		{name: "invalid-utf8", reject: true, applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			setMember(req, member(r, req.Op), "\"bad \xff\xfe\xc0\xaf bytes\"")
			req.Expect = boundary(req.Op, "a body that is not UTF-8")
		}},
		{name: "nul", reject: true, applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			m := member(r, req.Op)
			if r.IntN(2) == 0 {
				// An escaped NUL or half a surrogate pair: valid JSON syntax, but Postgres holds
				// neither, and the second is no character at all.
				setMember(req, m, anyOf(r, []string{`"a\u0000b"`, `"a\ud800b"`, `"\udfff"`}))
				req.Expect = boundary(req.Op, "a string with U+0000 or a lone surrogate")
				return
			}
			setMember(req, m, "\"a\x00b\"") // a raw NUL: not JSON
			switch {
			case svcBody(req.Op):
				req.Expect = expect(400, "a raw control character in a string is not JSON", "invalid_body")
			case req.Op.auth():
				req.Expect = expect(400, "a raw control character in a string is not JSON", "VALIDATION_ERROR")
			}
		}},
		{name: "not-json", reject: true, applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			bodies := []string{"{", "nope", "{} {}", "\xef\xbb\xbf{}", "[]", "123", `"s"`, `{"a":}`, `{'a':1}`, "NaN", `{"a":NaN}`, `{"a":Infinity}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`, `{"a":0x10}`, `{"a":1,}`, `{"a" 1}`}
			b := anyOf(r, bodies)
			req.Body = []byte(b)
			req.Header.Set("Content-Type", "application/json")
			switch {
			case svcBody(req.Op):
				req.Expect = expect(400, "a body that is not one JSON object", "invalid_body")
			case req.Op.auth():
				req.Expect = expect(400, "a body that is not one JSON object", "VALIDATION_ERROR")
			}
		}},
		{name: "empty-body", reject: true, applies: func(op *operation) bool { return op.Body != nil && op.BodyRequired }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			req.Body = []byte{}
			if svcBody(req.Op) && len(requiredOf(req.Op.Body)) > 0 {
				req.Expect = expect(400, "an empty body where one is required", "invalid_body")
			}
		}},
		{name: "body-under-1MiB", applies: func(op *operation) bool { return op.Body != nil }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			padTo(req, member(r, req.Op), 1<<20)
			req.Expect = &expectation{Not: 413, Why: "a body of exactly 1 MiB is within the limit"}
		}},
		{name: "body-over-1MiB", reject: true, applies: func(op *operation) bool { return op.Body != nil || op.mutating() }, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			if req.obj == nil {
				req.obj = map[string]any{}
			}
			padTo(req, member(r, req.Op), 1<<20+1+r.IntN(2)*(1<<20))
			req.Chunked = r.IntN(3) == 0
			req.Expect = expect(413, "a body over 1 MiB", "payload_too_large")
		}},
		{name: "content-type", applies: func(op *operation) bool { return op.Body != nil }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			ct := anyOf(r, []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "", "application/json; charset=utf-16", "application/jsonx", "APPLICATION/JSON", "application/json; charset=utf-8", "*/*"})
			req.Kind += ":" + ct
			if ct == "" {
				req.Header.Del("Content-Type")
			} else {
				req.Header.Set("Content-Type", ct)
			}
		}},
		// --- query -------------------------------------------------------------------------
		{name: "bad-limit", reject: true, applies: func(op *operation) bool { return hasParam(op, "limit") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			v := anyOf(r, []string{"0", "-1", "abc", "1.5", "1e2", "0x10", "99999999999999999999", "５", "1 ", "", strconv.Itoa(maxLimit(req.Op) + 1)})
			setQuery(req, "limit", v)
			if v != "" {
				req.Expect = expect(400, fmt.Sprintf("limit %q is not an integer in [1, %d]", v, maxLimit(req.Op)), "invalid_query")
			}
		}},
		{name: "limit-edge", applies: func(op *operation) bool { return hasParam(op, "limit") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			setQuery(req, "limit", anyOf(r, []string{"1", strconv.Itoa(maxLimit(req.Op))}))
			req.Expect = &expectation{Not: 400, Why: "limit at the edges of its range"}
		}},
		{name: "bad-cursor", reject: true, applies: func(op *operation) bool { return hasParam(op, "after") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			f.fx.mu.Lock()
			own := f.fx.cursors[req.Op.ID]
			var other string
			for id, c := range f.fx.cursors {
				sameList := id == "listRuns" && req.Op.ID == "listWorkflowRuns" || id == "listWorkflowRuns" && req.Op.ID == "listRuns"
				if id != req.Op.ID && !sameList {
					other = c
				}
			}
			f.fx.mu.Unlock()
			var cur map[string]any
			if raw, err := base64.RawURLEncoding.DecodeString(own); err == nil {
				_ = json.Unmarshal(raw, &cur)
			}
			definite := true
			var v string
			switch r.IntN(10) {
			case 0:
				v = "x"
			case 1:
				v = "!!!"
			case 2:
				v = strings.Repeat("A", 5000)
			case 3:
				v = other // another list's cursor
			case 4:
				v = forgedCursor(map[string]any{"k": "other", "p": []any{"x"}})
			case 5:
				v = base64.RawURLEncoding.EncodeToString([]byte("null"))
			case 6:
				c := map[string]any{"k": cur["k"], "s": "forged-scope", "p": cur["p"]}
				v = forgedCursor(c) // this list's kind, another scope
			case 7:
				c := map[string]any{"k": cur["k"], "s": cur["s"], "p": []any{1, 2}}
				v = forgedCursor(c)
			case 8:
				// This list's kind and scope, a position it never issued: garbage values.
				c := map[string]any{"k": cur["k"], "s": cur["s"], "p": anyOf(r, [][]any{{"not-a-time", "x"}, {}, {strings.Repeat("z", 3000)}, {"2026-01-01T00:00:00Z"}, {"9999-99-99T99:99:99Z", "wf_x", "extra"}, {"\u0000", "\u0000"}})}
				v = forgedCursor(c)
				definite = false
			default:
				b := []byte(own)
				if len(b) > 0 {
					b[r.IntN(len(b))] ^= 0x01
				}
				v = string(b)
				definite = false
			}
			setQuery(req, "after", v)
			if definite {
				req.Expect = expect(400, "a cursor this list did not issue", "invalid_query")
			}
		}},
		{name: "query-junk", applies: func(op *operation) bool { return op.Method == http.MethodGet }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			switch r.IntN(5) {
			case 0:
				setQuery(req, "status", anyOf(r, []string{"bogus", "", "COMPLETED", "completed,failed"}))
			case 1:
				setQuery(req, "include", anyOf(r, []string{"bogus", "", "workflow,workflow"}))
			case 2:
				setQuery(req, "workflowId", anyOf(r, []string{"", "wf_missing", "%00", "' OR 1=1"}))
			case 3:
				req.Path += sep(req.Path) + "limit=1&limit=2"
			default:
				req.Path += sep(req.Path) + "zz=%FF%FE&=&&"
			}
		}},
		// --- headers -----------------------------------------------------------------------
		{name: "bad-if-match", reject: true, applies: func(op *operation) bool { return hasParam(op, "If-Match") }, resign: false, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			v := anyOf(r, []string{"abc", "0", "-1", `"1`, `W/"1"`, "*", "1,2", "1.0", "0x1", "+1", "１", `""`})
			req.Header.Set("If-Match", v)
			req.Expect = expect(400, fmt.Sprintf("If-Match %q is not a positive integer", v), "invalid_if_match")
		}},
		{name: "odd-if-match", applies: func(op *operation) bool { return hasParam(op, "If-Match") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			req.Header.Set("If-Match", anyOf(r, []string{"1", `"1"`, "99999999999999999999999", "2147483648", `"100000"`}))
		}},
		{name: "idempotency-key", applies: func(op *operation) bool { return hasParam(op, "Idempotency-Key") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			switch r.IntN(6) {
			case 0:
				req.Header.Set("Idempotency-Key", "")
			case 1:
				req.Header.Set("Idempotency-Key", strings.Repeat("k", 255))
			case 2:
				req.Header.Set("Idempotency-Key", strings.Repeat("k", 256+r.IntN(4000)))
				req.Expect = expect(400, "an Idempotency-Key over its maxLength of 255", "invalid_body")
			case 3:
				req.Header.Set("Idempotency-Key", "ключ 🔑 "+alnum(r, 6, letters))
			case 4:
				req.Header.Set("Idempotency-Key", "fz-shared-key") // the same key, other bodies
			default:
				req.Header.Set("Idempotency-Key", "a\tb  c")
			}
		}},
		{name: "huge-header", applies: func(op *operation) bool { return true }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			req.Header.Set("X-Fz-Padding", strings.Repeat("p", anyOf(r, []int{8 << 10, 64 << 10, 900 << 10})))
		}},
		{name: "odd-headers", applies: func(op *operation) bool { return true }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			req.Header.Set("X-Request-Id", anyOf(r, []string{strings.Repeat("r", 5000), "ü😀", "", "a b"}))
			req.Header.Set("Traceparent", anyOf(r, []string{"zzz", "00-" + strings.Repeat("0", 32) + "-" + strings.Repeat("0", 16) + "-01", "ff-" + strings.Repeat("f", 32) + "-" + strings.Repeat("f", 16) + "-ff"}))
			req.Header.Set("Accept", anyOf(r, []string{"text/html", "application/xml", "*/*;q=0"}))
		}},
		// --- path --------------------------------------------------------------------------
		{name: "foreign-id", reject: true, applies: func(op *operation) bool { return hasPathParam(op) && (guarded(op) || op.ID == "authApiKeyRevoke") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			x := f.fx
			id := x.foreignWF
			switch {
			case strings.HasPrefix(req.Op.Path, "/api/runs/"):
				id = x.foreignRun
			case strings.HasPrefix(req.Op.Path, "/api/schedules/"):
				id = x.foreignSchedule
			case req.Op.ID == "authApiKeyRevoke":
				id = x.foreignKey
			}
			replaceParam(req, id)
			if req.Op.ID == "listWorkflowRuns" {
				return // a list: another organization's workflow may list as empty
			}
			req.Expect = expect(404, "another organization's resource", "not_found", "workflow_not_found", "KEY_NOT_FOUND")
		}},
		{name: "missing-id", reject: true, applies: func(op *operation) bool { return hasPathParam(op) && (guarded(op) || op.ID == "authApiKeyRevoke") }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			prefix := "wf_"
			switch {
			case strings.HasPrefix(req.Op.Path, "/api/runs/"):
				prefix = "run_"
			case strings.HasPrefix(req.Op.Path, "/api/schedules/"):
				prefix = "sch_"
			case req.Op.ID == "authApiKeyRevoke":
				prefix = "key_"
			}
			replaceParam(req, prefix+"01"+strings.ToLower(alnum(r, 24, letters)))
			if req.Op.ID == "listWorkflowRuns" {
				return
			}
			req.Expect = expect(404, "no such resource", "not_found", "workflow_not_found", "KEY_NOT_FOUND")
		}},
		{name: "path-garbage", reject: true, applies: hasPathParam, resign: true, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			v := anyOf(r, []string{"%2F", "a%2Fb", "..", "%2e%2e", ".", "%00", "%FF%FE", "%C0%AF", escape("wf_ü😀"), strings.Repeat("A", 4096),
				"%20", escape("'; DROP TABLE x;--"), "%252F", "~", "wf_" + strings.Repeat("9", 200), "..%2F..%2Fhealth", "%2e%2e%2f%2e%2e%2fapi%2fbootstrap", "x?y", escape("{{7*7}}")})
			req.Kind += ":" + truncate(v, 20)
			replaceParam(req, v)
			req.PathMutated = true
		}},
		{name: "path-shape", applies: func(op *operation) bool { return true }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			p, q, _ := strings.Cut(req.Path, "?")
			switch r.IntN(4) {
			case 0:
				p += "/"
			case 1:
				p = strings.ToUpper(p)
			case 2:
				p = strings.Replace(p, "/", "//", 2)
			default:
				p += "/../" + p[strings.LastIndexByte(p, '/')+1:]
			}
			req.Path = p
			if q != "" {
				req.Path += "?" + q
			}
			req.PathMutated = true
		}},
		// --- method ------------------------------------------------------------------------
		{name: "wrong-method", reject: true, applies: func(op *operation) bool { return true }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			var cands []string
			for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				if !containsStr(f.spec.Paths[req.Op.Path], m) {
					cands = append(cands, m)
				}
			}
			req.Method = anyOf(r, cands)
			if _, op, _ := f.target(req); op != nil {
				// The path is also another template's (DELETE /api/auth/api-key/list is the
				// revoke route with id "list"): that operation answers.
				req.Op = op
				return
			}
			switch {
			case req.Op.ID == "bootstrap":
				req.Expect = expect(404, "bootstrap answers every other method 404", "not_found")
			case req.Op.auth():
				req.Expect = expect(405, "a known path with another method")
			default:
				req.Expect = expect(405, "a known path with another method", "method_not_allowed")
			}
			req.Op = nil // counted apart: no operation has this method
		}},
		{name: "odd-method", applies: func(op *operation) bool { return true }, apply: func(f *fuzzer, r *rand.Rand, req *request) {
			req.Method = anyOf(r, []string{"OPTIONS", "TRACE", "FOO", "PROPFIND", "CONNECT"})
			req.Op = nil
		}},
	}
}

// mutate builds a valid request of op without side effects and breaks it one way.
// rejectOnly limits the choice to the mutations meant to be refused.
func (f *fuzzer) mutate(r *rand.Rand, op *operation, rejectOnly bool) *request {
	req := f.buildValid(r, op, false)
	var cands []mutation
	for _, m := range f.muts {
		if m.applies(op) && (!rejectOnly || m.reject) {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return req
	}
	m := anyOf(r, cands)
	req.Kind = "mut/" + m.name
	m.apply(f, r, req)
	if m.resign && req.Op != nil && isWebhook(req.Op) {
		sign(req, "fz-"+alnum(r, 16, letters))
	}
	return req
}

// padTo makes the body exactly size bytes by growing a string member.
func padTo(req *request, m string, size int) {
	setMember(req, m, `""`)
	n := size - len(req.Body)
	if n < 0 {
		n = 0
	}
	setMember(req, m, `"`+strings.Repeat("p", n)+`"`)
}

func sep(p string) string {
	if strings.Contains(p, "?") {
		return "&"
	}
	return "?"
}

// setQuery sets one query parameter, keeping its value as given (already escaped or not).
func setQuery(req *request, name, value string) {
	p, q, _ := strings.Cut(req.Path, "?")
	var kept []string
	for _, kv := range strings.Split(q, "&") {
		if kv != "" && !strings.HasPrefix(kv, name+"=") {
			kept = append(kept, kv)
		}
	}
	kept = append(kept, name+"="+queryEscape(value))
	req.Path = p + "?" + strings.Join(kept, "&")
}

// replaceParam puts v (already escaped) in place of the operation's first path parameter.
func replaceParam(req *request, v string) {
	tmpl := strings.Split(req.Op.Path, "/")
	p, q, _ := strings.Cut(req.Path, "?")
	segs := strings.Split(p, "/")
	for i, t := range tmpl {
		if strings.HasPrefix(t, "{") && i < len(segs) {
			segs[i] = v
			break
		}
	}
	req.Path = strings.Join(segs, "/")
	if q != "" {
		req.Path += "?" + q
	}
}
