package fuzz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// types returns the JSON types a schema allows ("string", "null", ...); none means any.
func types(sch map[string]any) []string {
	switch t := sch["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	if _, ok := sch["properties"]; ok {
		return []string{"object"}
	}
	if _, ok := sch["items"]; ok {
		return []string{"array"}
	}
	return nil
}

// merged folds allOf into one object schema (properties and required of every part).
func merged(sch map[string]any) map[string]any {
	all, ok := sch["allOf"].([]any)
	if !ok {
		return sch
	}
	out := map[string]any{"type": "object"}
	props := map[string]any{}
	var req []any
	for k, v := range sch {
		if k != "allOf" {
			out[k] = v
		}
	}
	for _, p := range all {
		pm, _ := p.(map[string]any)
		pm = merged(pm)
		if ps, ok := pm["properties"].(map[string]any); ok {
			for k, v := range ps {
				props[k] = v
			}
		}
		if r, ok := pm["required"].([]any); ok {
			req = append(req, r...)
		}
		if ap, ok := pm["additionalProperties"]; ok {
			out["additionalProperties"] = ap
		}
	}
	out["properties"] = props
	out["required"] = req
	return out
}

func props(sch map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	ps, _ := merged(sch)["properties"].(map[string]any)
	for k, v := range ps {
		m, _ := v.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		out[k] = m
	}
	return out
}

func requiredOf(sch map[string]any) []string {
	var out []string
	r, _ := merged(sch)["required"].([]any)
	for _, x := range r {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func closed(sch map[string]any) bool {
	ap, ok := merged(sch)["additionalProperties"].(bool)
	return ok && !ap
}

func intOf(v any, def int) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return def
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hintFunc supplies a realistic value for a member by name (real ids, valid crons, unique
// names); ok false lets the schema decide.
type hintFunc func(name string, sch map[string]any) (any, bool)

// valid generates a value the schema accepts.
func valid(r *rand.Rand, sch map[string]any, name string, hint hintFunc, depth int) any {
	if hint != nil && name != "" {
		if v, ok := hint(name, sch); ok {
			return v
		}
	}
	if sch == nil {
		return anyJSON(r, 2)
	}
	if c, ok := sch["const"]; ok {
		return c
	}
	if e, ok := sch["enum"].([]any); ok && len(e) > 0 {
		return e[r.IntN(len(e))]
	}
	if one, ok := sch["oneOf"].([]any); ok && len(one) > 0 {
		m, _ := one[r.IntN(len(one))].(map[string]any)
		return valid(r, m, name, hint, depth)
	}
	if _, ok := sch["allOf"]; ok {
		sch = merged(sch)
	}
	ts := types(sch)
	if len(ts) == 0 {
		return anyJSON(r, 2)
	}
	t := ts[r.IntN(len(ts))]
	if t == "null" && len(ts) > 1 && r.IntN(4) > 0 {
		t = ts[0]
		if t == "null" {
			t = ts[1]
		}
	}
	switch t {
	case "null":
		return nil
	case "boolean":
		return r.IntN(2) == 0
	case "integer":
		lo, hi := intOf(sch["minimum"], 0), intOf(sch["maximum"], 1000)
		if hi < lo {
			hi = lo
		}
		return lo + r.IntN(hi-lo+1)
	case "number":
		return math.Round(r.Float64()*1e6) / 100
	case "string":
		return validString(r, sch)
	case "array":
		items, _ := sch["items"].(map[string]any)
		n := r.IntN(3)
		if mx := intOf(sch["maxItems"], 100); n > mx {
			n = mx
		}
		out := make([]any, n)
		for i := range out {
			out[i] = valid(r, items, "", hint, depth+1)
		}
		return out
	case "object":
		out := map[string]any{}
		req := map[string]bool{}
		for _, k := range requiredOf(sch) {
			req[k] = true
		}
		ps := props(sch)
		for _, k := range sortedKeys(ps) {
			if req[k] || r.IntN(2) == 0 {
				out[k] = valid(r, ps[k], k, hint, depth+1)
			}
		}
		return out
	}
	return nil
}

// knownPatterns are the document's patterns, each with a generator of matching strings.
var knownPatterns = map[string]func(r *rand.Rand) string{ //nolint:gochecknoglobals // test table
	"^[a-z0-9]+(-[a-z0-9]+)*$": func(r *rand.Rand) string {
		return "s" + alnum(r, 6, "abcdefghijklmnopqrstuvwxyz0123456789") + "-" + alnum(r, 3, "abc123")
	},
	"^[A-Za-z0-9_-]{1,64}$":             func(r *rand.Rand) string { return alnum(r, 1+r.IntN(12), letters+"_-") },
	"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$": func(r *rand.Rand) string { return "s" + alnum(r, r.IntN(10), letters+"._-") },
	"^[0-9]+$":                          func(r *rand.Rand) string { return fmt.Sprint(r.IntN(1 << 30)) },
	`^("?)[1-9][0-9]*\1$`:               func(r *rand.Rand) string { return fmt.Sprint(1 + r.IntN(5)) },
	"^sha256=[0-9a-fA-F]{64}$":          func(r *rand.Rand) string { return "sha256=" + alnum(r, 64, "0123456789abcdef") },
}

const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func alnum(r *rand.Rand, n int, set string) string {
	var b strings.Builder
	for range n {
		b.WriteByte(set[r.IntN(len(set))])
	}
	return b.String()
}

func validString(r *rand.Rand, sch map[string]any) string {
	if p, ok := sch["pattern"].(string); ok {
		if g, ok := knownPatterns[p]; ok {
			return g(r)
		}
		if strings.HasPrefix(p, "^") && regexp.QuoteMeta(strings.TrimPrefix(p, "^")) == strings.TrimPrefix(p, "^") {
			return strings.TrimPrefix(p, "^") + alnum(r, 8, letters)
		}
	}
	if ex, ok := sch["examples"].([]any); ok && len(ex) > 0 {
		if s, ok := ex[r.IntN(len(ex))].(string); ok {
			return s
		}
	}
	if f, _ := sch["format"].(string); f == "email" {
		return fmt.Sprintf("fz-%s@example.com", alnum(r, 10, "abcdefghijklmnopqrstuvwxyz0123456789"))
	}
	lo, hi := intOf(sch["minLength"], 1), intOf(sch["maxLength"], 24)
	if hi > 24 {
		hi = 24
	}
	if hi < lo {
		hi = lo
	}
	return alnum(r, lo+r.IntN(hi-lo+1), letters)
}

// anyJSON is a small random JSON value.
func anyJSON(r *rand.Rand, depth int) any {
	k := r.IntN(7)
	if depth <= 0 && k >= 5 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return r.IntN(2000) - 1000
	case 3:
		return math.Round(r.NormFloat64()*1e4) / 100
	case 4:
		return alnum(r, r.IntN(12), letters+" éü€😀")
	case 5:
		out := make([]any, r.IntN(4))
		for i := range out {
			out[i] = anyJSON(r, depth-1)
		}
		return out
	default:
		out := map[string]any{}
		for range r.IntN(4) {
			out[alnum(r, 1+r.IntN(6), letters)] = anyJSON(r, depth-1)
		}
		return out
	}
}

// wrongType returns a value of a JSON type the schema does not allow, nil ok false when
// every type is allowed.
func wrongType(r *rand.Rand, sch map[string]any) (any, bool) {
	ts := types(sch)
	if len(ts) == 0 {
		if _, ok := sch["enum"]; !ok {
			if _, ok := sch["const"]; !ok {
				return nil, false
			}
		}
		return map[string]any{"not": "in the enum"}, true
	}
	allowed := map[string]bool{}
	for _, t := range ts {
		allowed[t] = true
	}
	if allowed["number"] {
		allowed["integer"] = true
	}
	cands := []struct {
		t string
		v any
	}{{"string", "wrong"}, {"integer", 42}, {"boolean", true}, {"array", []any{1, "a"}}, {"object", map[string]any{"a": 1}}, {"number", 1.5}}
	// null is left out: Go readers take it as an absent member, which the contract allows.
	var out []any
	for _, c := range cands {
		if !allowed[c.t] && (c.t != "number" || !allowed["integer"]) {
			out = append(out, c.v)
		}
	}
	if len(out) == 0 {
		return nil, false
	}
	return out[r.IntN(len(out))], true
}

// ---------------------------------------------------------------------------------------
// A small JSON Schema checker for the answers: the keywords the document uses.

var (
	patternMu    sync.Mutex                                                       //nolint:gochecknoglobals // test cache
	patternCache = map[string]*regexp.Regexp{}                                    //nolint:gochecknoglobals // test cache
	timestampRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`) //nolint:gochecknoglobals // docs/API.md, Conventions
)

func compiled(p string) *regexp.Regexp {
	patternMu.Lock()
	defer patternMu.Unlock()
	re, ok := patternCache[p]
	if !ok {
		re, _ = regexp.Compile(p) // the document's back-reference pattern does not compile: skipped
		patternCache[p] = re
	}
	return re
}

// check returns what in v the schema refuses, each with its JSON Pointer.
func check(sch map[string]any, v any, at string) []string {
	if sch == nil {
		return nil
	}
	var out []string
	if all, ok := sch["allOf"].([]any); ok {
		for _, p := range all {
			pm, _ := p.(map[string]any)
			out = append(out, check(pm, v, at)...)
		}
	}
	if one, ok := sch["oneOf"].([]any); ok {
		matched := false
		for _, p := range one {
			pm, _ := p.(map[string]any)
			if len(check(pm, v, at)) == 0 {
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, at+": matches none of oneOf")
		}
	}
	if c, ok := sch["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		out = append(out, fmt.Sprintf("%s: want const %v, got %v", at, c, v))
	}
	if e, ok := sch["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if fmt.Sprint(x) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("%s: %v not in enum %v", at, v, e))
		}
	}
	ts := types(sch)
	if len(ts) > 0 {
		ok := false
		for _, t := range ts {
			if jsonIs(t, v) {
				ok = true
			}
		}
		if !ok {
			return append(out, fmt.Sprintf("%s: want %v, got %s", at, ts, jsonType(v)))
		}
	}
	switch x := v.(type) {
	case string:
		if p, ok := sch["pattern"].(string); ok {
			if re := compiled(p); re != nil && !re.MatchString(x) {
				out = append(out, fmt.Sprintf("%s: %q does not match %s", at, x, p))
			}
		}
		if f, _ := sch["format"].(string); f == "date-time" && !timestampRE.MatchString(x) {
			out = append(out, fmt.Sprintf("%s: %q is not RFC 3339 UTC with 3 fractional digits", at, x))
		}
	case float64:
		if mn, ok := sch["minimum"]; ok && x < float64(intOf(mn, 0)) {
			out = append(out, fmt.Sprintf("%s: %v below minimum %v", at, x, mn))
		}
	case []any:
		items, _ := sch["items"].(map[string]any)
		for i, it := range x {
			out = append(out, check(items, it, fmt.Sprintf("%s/%d", at, i))...)
		}
	case map[string]any:
		for _, k := range requiredOf(sch) {
			if _, ok := x[k]; !ok {
				out = append(out, fmt.Sprintf("%s: missing required %q", at, k))
			}
		}
		ps, _ := sch["properties"].(map[string]any)
		for k, p := range ps {
			if xv, ok := x[k]; ok {
				pm, _ := p.(map[string]any)
				out = append(out, check(pm, xv, at+"/"+k)...)
			}
		}
	}
	return out
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func jsonIs(t string, v any) bool {
	got := jsonType(v)
	return got == t || (t == "number" && got == "integer")
}
