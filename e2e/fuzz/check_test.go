package fuzz

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// serviceCodes is the one table of the service error codes a client may see (docs/API.md,
// proto/errs) with the status each one has. 5xx codes are left out on purpose: no request of
// this test may be answered with one.
var serviceCodes = map[string]int{ //nolint:gochecknoglobals // the test's error table
	"unauthorized":           401,
	"no_active_organization": 401,
	"invalid_signature":      401,
	"not_found":              404,
	"workflow_not_found":     404,
	"method_not_allowed":     405,
	"invalid_body":           400,
	"invalid_query":          400,
	"invalid_cron":           400,
	"invalid_if_match":       400,
	"workflow_invalid":       400,
	"webhook_rejected":       400,
	"version_mismatch":       412,
	"rate_limited":           429,
	"workflow_name_taken":    409,
	"run_finished":           409,
	"payload_too_large":      413,
	"invalid_origin":         403,
}

// authCodes is the same for the auth layer's {code, message} errors (docs/API.md and the
// AuthError schema of the document); INVALID_TOKEN is 400 for a reset token, 401 for a key.
var authCodes = map[string][]int{ //nolint:gochecknoglobals // the test's error table
	"MISSING_OR_NULL_ORIGIN":                   {403},
	"INVALID_ORIGIN":                           {403},
	"INVALID_CREDENTIALS":                      {401},
	"USER_NOT_FOUND":                           {404},
	"USER_ALREADY_EXISTS":                      {422},
	"INVALID_TOKEN":                            {400, 401},
	"INVALID_REFERENCE_ID_FROM_API_KEY":        {401},
	"UNAUTHORIZED":                             {401},
	"FORBIDDEN":                                {403},
	"USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION": {403},
	"ORGANIZATION_ALREADY_EXISTS":              {400},
	"KEY_NOT_FOUND":                            {404},
	"VALIDATION_ERROR":                         {400},
	"RATE_LIMITED":                             {429},
	"PASSWORD_TOO_SHORT":                       {400},
	"PASSWORD_TOO_LONG":                        {400},
	"YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER": {400},
	"NO_ACTIVE_ORGANIZATION":                              {400},
	"MEMBER_NOT_FOUND":                                    {400},
	"INVITATION_NOT_FOUND":                                {400},
	"USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION":       {400},
	"USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION":        {400},
	"YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION":         {403},
	"PAYLOAD_TOO_LARGE":                                   {413},
	// Tenant ceilings (issue 21): the fuzzer creates organizations and keys many times over.
	"YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_ORGANIZATIONS": {403},
	"YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_API_KEYS":      {403},
}

// guardedCodes can answer any guarded route: the guard, the rate limit, the body limit.
var guardedCodes = []string{"unauthorized", "no_active_organization", "rate_limited", "payload_too_large", "invalid_origin"} //nolint:gochecknoglobals // error table

// routeCodes are the codes each operation may answer besides guardedCodes (docs/API.md and
// the operation's responses in the document).
var routeCodes = map[string][]string{ //nolint:gochecknoglobals // error table
	// MCP: a body that is not an MCP JSON-RPC message, or an Accept that does not take JSON.
	"mcp":                    {"invalid_body"},
	"listWorkflows":          {"invalid_query"},
	"createWorkflow":         {"invalid_body", "workflow_name_taken"},
	"getWorkflow":            {"not_found"},
	"describeWorkflow":       {"invalid_body", "invalid_if_match", "version_mismatch", "not_found", "workflow_name_taken"},
	"deleteWorkflow":         {"not_found"},
	"editWorkflow":           {"invalid_body", "invalid_if_match", "version_mismatch", "not_found"},
	"listConnectors":         {},
	"startRun":               {"invalid_body", "workflow_invalid", "not_found", "workflow_not_found"},
	"listWorkflowRuns":       {"invalid_query", "not_found"},
	"listRuns":               {"invalid_query", "not_found"},
	"getRun":                 {"not_found", "invalid_query"},
	"getRunLogs":             {"invalid_query", "not_found"},
	"streamRunEvents":        {"invalid_query", "not_found"},
	"streamRunsEvents":       {"invalid_query"},
	"cancelRun":              {"not_found", "run_finished"},
	"signalRun":              {"invalid_body", "not_found", "run_finished"},
	"getRunRetention":        {"not_found"},
	"setRunRetention":        {"invalid_body", "not_found", "forbidden"},
	"createSchedule":         {"invalid_body", "invalid_cron", "workflow_not_found"},
	"listSchedules":          {"invalid_query", "not_found"},
	"getSchedule":            {"not_found"},
	"previewSchedule":        {"invalid_cron"},
	"updateSchedule":         {"invalid_body", "invalid_cron", "not_found", "workflow_not_found"},
	"deleteSchedule":         {"not_found"},
	"tick":                   {"invalid_body"},
	"bootstrap":              {"not_found", "invalid_body", "rate_limited", "payload_too_large"},
	"deliverGitHubWebhook":   {"invalid_signature", "webhook_rejected", "invalid_body", "workflow_not_found", "workflow_invalid", "not_found", "payload_too_large"},
	"deliverStandardWebhook": {"invalid_signature", "webhook_rejected", "invalid_body", "workflow_not_found", "workflow_invalid", "not_found", "payload_too_large"},
	"getHealth":              {},
}

// routingCodes answer a path or method no operation has.
var routingCodes = []string{"not_found", "method_not_allowed", "unauthorized", "no_active_organization", "rate_limited", "payload_too_large"} //nolint:gochecknoglobals // error table

// failure is one broken rule, with the request that broke it.
type failure struct {
	Kind   string
	Detail string
	Req    *request
	Res    *result
}

// target is what the gateway will see: the cleaned, decoded path and the operation, if any,
// of that path and method.
func (f *fuzzer) target(req *request) (string, *operation, bool) {
	p := req.Path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	dec, err := urlPathUnescape(p)
	if err == nil {
		p = dec
	}
	clean := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	var pathKnown bool
	for _, op := range f.spec.Ops {
		if !templateMatch(op.Path, clean) {
			continue
		}
		pathKnown = true
		if op.Method == req.Method {
			return clean, op, true
		}
	}
	return clean, nil, pathKnown
}

func templateMatch(tmpl, p string) bool {
	ts := strings.Split(strings.Trim(tmpl, "/"), "/")
	ps := strings.Split(strings.Trim(p, "/"), "/")
	if len(ts) != len(ps) || strings.HasSuffix(p, "/") && p != "/" {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if t != ps[i] {
			return false
		}
	}
	return true
}

// checkResponse applies every rule to one exchange.
func (f *fuzzer) checkResponse(req *request, res *result) []failure {
	var out []failure
	fail := func(kind, format string, args ...any) {
		out = append(out, failure{Kind: kind, Detail: fmt.Sprintf(format, args...), Req: req, Res: res})
	}
	if res.Err != nil {
		fail("transport", "%v", res.Err)
		return out
	}
	if res.Status >= 500 {
		fail("5xx", "status %d", res.Status)
	}
	if res.Status == http.StatusRequestHeaderFieldsTooLarge && !json.Valid(res.Body) {
		// net/http's own answer to headers over the server's MaxHeaderBytes: one failure, not
		// one per missing header and shape rule.
		fail("431-plain-text", "headers over the limit answered by net/http itself: %q, no X-Request-Id, no JSON", truncate(string(res.Body), 60))
		return out
	}
	if res.Header.Get("X-Request-Id") == "" {
		fail("headers", "no X-Request-Id")
	}
	clean, op, pathKnown := f.target(req)
	authPath := strings.HasPrefix(clean, "/api/auth/")
	guarded := clean != "/health" && clean != "/api/openapi.json" && clean != "/api/bootstrap" && !authPath && !strings.HasPrefix(clean, "/api/webhooks/")
	// A 413 is answered before the guard (README, "How a request flows", step 1: a declared
	// Content-Length or headers past their limit), so no bucket was consulted.
	// invalid_origin is the guard's too: the cookie was not used, so no principal's bucket was.
	originRefused := res.Status == http.StatusForbidden && strings.Contains(string(res.Body), `"invalid_origin"`)
	if guarded && res.Status != http.StatusUnauthorized && res.Status != http.StatusRequestEntityTooLarge && res.Status < 500 && !originRefused {
		var missing []string
		for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
			if _, err := strconv.Atoi(res.Header.Get(h)); err != nil {
				missing = append(missing, h)
			}
		}
		if len(missing) > 0 {
			fail("headers", "%d answer on a guarded route without %s", res.Status, strings.Join(missing, ", "))
		}
	}

	var body any
	jsonErr := json.Unmarshal(res.Body, &body)
	if res.Status >= 400 {
		ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
		if ct != "application/json" {
			fail("error-shape", "error answer with Content-Type %q", res.Header.Get("Content-Type"))
		}
		obj, ok := body.(map[string]any)
		if jsonErr != nil || !ok {
			fail("error-shape", "error body is not a JSON object")
		} else {
			f.checkErrorBody(req, res, obj, clean, op, pathKnown, authPath, fail)
		}
	}
	if res.Status >= 200 && res.Status < 300 && op != nil && req.Method != http.MethodHead {
		sch, documented := op.Responses[strconv.Itoa(res.Status)]
		switch {
		case !documented:
			fail("2xx-undocumented", "status %d is not among the operation's documented answers", res.Status)
		case sch != nil:
			ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
			if ct != "application/json" {
				fail("2xx-body", "Content-Type %q, the document says application/json", res.Header.Get("Content-Type"))
			}
			switch probs := []string(nil); {
			case res.Size > maxRead:
				// Not parsed (see result.Size); the transfer itself completed.
			case jsonErr != nil:
				fail("2xx-body", "body is not JSON: %v", jsonErr)
			default:
				if probs = check(sch, body, ""); len(probs) > 5 {
					probs = probs[:5]
				}
				if len(probs) > 0 {
					fail("2xx-body", "body does not match the document's schema: %s", strings.Join(probs, "; "))
				}
			}
		}
	}
	if e := req.Expect; e != nil && res.Status < 500 {
		code := errorCode(body)
		switch {
		case e.Not != 0 && res.Status == e.Not:
			fail("contract", "want anything but %d, got %d %s (%s)", e.Not, res.Status, code, e.Why)
		case e.Status != 0 && res.Status != e.Status, len(e.Codes) > 0 && !containsStr(e.Codes, code):
			fail("contract", "want %d %v, got %d %s (%s)", e.Status, e.Codes, res.Status, code, e.Why)
		}
	}
	return out
}

func errorCode(body any) string {
	m, _ := body.(map[string]any)
	if c, ok := m["error"].(string); ok {
		return c
	}
	c, _ := m["code"].(string)
	return c
}

func (f *fuzzer) checkErrorBody(req *request, res *result, obj map[string]any, clean string, op *operation, pathKnown, authPath bool, fail func(string, string, ...any)) {
	code, isService := obj["error"].(string)
	authCode, isAuth := obj["code"].(string)
	if m, ok := obj["message"]; ok {
		if _, ok := m.(string); !ok {
			fail("error-shape", "message is not a string")
		}
	}
	// The auth layer answers {code, message}; the router and the body limit in front of its
	// handlers answer in the service shape (routing happens before the auth layer), and a 413
	// from identity carries both members.
	if authPath && isAuth && (!isService || code == "payload_too_large") {
		statuses, known := authCodes[authCode]
		switch {
		case !known:
			fail("error-code", "auth code %q is not in the contract's table", authCode)
		case !containsInt(statuses, res.Status):
			fail("error-code", "auth code %s with status %d (table: %v)", authCode, res.Status, statuses)
		}
		if _, ok := obj["message"].(string); !ok {
			fail("error-shape", "auth error without a message")
		}
		if res.Status == http.StatusTooManyRequests {
			f.check429(res, obj, fail)
		}
		return
	}
	if op != nil && op.ID == "bootstrap" && isAuth && !isService {
		if authCode != "MISSING_OR_NULL_ORIGIN" && authCode != "INVALID_ORIGIN" {
			fail("error-code", "bootstrap answered auth code %q; only the Origin check has that shape", authCode)
		}
		return
	}
	if !isService {
		fail("error-shape", "error body has no string member \"error\"")
		return
	}
	status, known := serviceCodes[code]
	if !known {
		fail("error-code", "code %q is not in the contract's table", code)
		return
	}
	if status != res.Status {
		fail("error-code", "code %s with status %d (table: %d)", code, res.Status, status)
	}
	var allowed []string
	switch {
	case authPath:
		allowed = []string{"not_found", "method_not_allowed", "payload_too_large"}
	case req.PathMutated || op == nil && !pathKnown:
		allowed = routingCodes
		for _, cs := range routeCodes {
			allowed = append(allowed, cs...)
		}
	case op == nil:
		allowed = routingCodes
	default:
		allowed = append(append([]string{"method_not_allowed"}, routeCodes[op.ID]...), guardedCodes...)
		if op.Open {
			// Any request, on any route, can carry headers past their limit (413).
			allowed = append(append([]string{}, routeCodes[op.ID]...), "method_not_allowed", "payload_too_large")
		}
	}
	if !containsStr(allowed, code) {
		fail("error-code", "code %s is not one the contract lists for %s %s (allowed: %v)", code, req.Method, clean, allowed)
	}
	if issues, ok := obj["issues"]; ok {
		list, ok := issues.([]any)
		if !ok {
			fail("error-shape", "issues is not an array")
		}
		for _, it := range list {
			m, _ := it.(map[string]any)
			p, ok1 := m["path"].(string)
			_, ok2 := m["message"].(string)
			if !ok1 || !ok2 || (p != "" && !strings.HasPrefix(p, "/")) {
				fail("error-shape", "issue %v is not {path: JSON Pointer, message}", it)
			}
		}
	}
	if code == "invalid_body" && req.Op != nil && !req.Op.Open {
		if _, ok := obj["issues"].([]any); !ok {
			fail("error-shape", "invalid_body without issues")
		}
	}
	if code == "version_mismatch" {
		if _, ok := obj["current"].(float64); !ok {
			fail("error-shape", "version_mismatch without current")
		}
	}
	if res.Status == http.StatusTooManyRequests {
		f.check429(res, obj, fail)
	}
}

// check429 is the shape of a rate-limited answer: retryAfterMs ≥ 1 and Retry-After in seconds.
func (f *fuzzer) check429(res *result, obj map[string]any, fail func(string, string, ...any)) {
	f.count429.Add(1)
	ms, ok := obj["retryAfterMs"].(float64)
	if !ok || ms < 1 || ms != float64(int64(ms)) {
		fail("429-shape", "retryAfterMs %v is not an integer ≥ 1", obj["retryAfterMs"])
	}
	ra, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		fail("429-shape", "Retry-After %q is not a positive integer", res.Header.Get("Retry-After"))
	} else if want := (int64(ms) + 999) / 1000; ok && (int64(ra) < want || int64(ra) > want+1) {
		fail("429-shape", "Retry-After %d s does not round up retryAfterMs %v", ra, ms)
	}
}

func containsStr(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func containsInt(xs []int, x int) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
