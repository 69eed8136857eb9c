package catalog

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"svc.dev/services/workflow-editor/internal/domain/repair"
)

// Suggestions for values: where a value a model sent has one obvious meaning in the param's
// type or format ("2000" for the integer 2000, "5 minutes" for the duration 5m), that value
// is did_you_mean. Each is checked against the param's schema before it is offered: a
// suggestion that would be refused in turn is worse than none.

// valueAt is the value at loc in params.
func valueAt(params map[string]any, loc []string) (any, bool) {
	var cur any = params
	for _, tok := range loc {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// withValueAt is params with v at loc, copying only the containers on the way.
func withValueAt(params map[string]any, loc []string, v any) map[string]any {
	var set func(cur any, loc []string) any
	set = func(cur any, loc []string) any {
		if len(loc) == 0 {
			return v
		}
		switch c := cur.(type) {
		case map[string]any:
			m := make(map[string]any, len(c))
			for k, e := range c {
				m[k] = e
			}
			m[loc[0]] = set(c[loc[0]], loc[1:])
			return m
		case []any:
			i, err := strconv.Atoi(loc[0])
			if err != nil || i < 0 || i >= len(c) {
				return c
			}
			s := append([]any(nil), c...)
			s[i] = set(c[i], loc[1:])
			return s
		}
		return cur
	}
	out, _ := set(params, loc).(map[string]any)
	return out
}

// fits reports whether v at loc satisfies the params schema there.
func (k *Connector) fits(params map[string]any, loc []string, v any) bool {
	err := k.schema.Validate(toSchemaValue(withValueAt(params, loc, v)))
	if err == nil {
		return true
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return false
	}
	for _, leaf := range leaves(ve) {
		if hasPrefix(leaf.InstanceLocation, loc) || hasPrefix(loc, leaf.InstanceLocation) {
			return false
		}
	}
	return true
}

func hasPrefix(loc, prefix []string) bool {
	if len(prefix) > len(loc) {
		return false
	}
	for i := range prefix {
		if loc[i] != prefix[i] {
			return false
		}
	}
	return true
}

// suggestValue is the value of the right JSON type that got (at loc) obviously means, or nil.
func (k *Connector) suggestValue(params map[string]any, loc []string) any {
	got, ok := valueAt(params, loc)
	if !ok || len(loc) == 0 {
		return nil
	}
	name := loc[len(loc)-1]
	var candidates []any
	switch g := got.(type) {
	case string:
		s := strings.TrimSpace(g)
		if n, ok := repair.Number(s, strings.HasSuffix(name, "_ms")); ok {
			candidates = append(candidates, n)
		}
		if strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") {
			var v any
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			if dec.Decode(&v) == nil && !dec.More() {
				candidates = append(candidates, v)
			}
		} else if m := repair.HeaderLines(s); m != nil {
			candidates = append(candidates, m)
		}
	case json.Number:
		candidates = append(candidates, string(g))
	case bool:
		candidates = append(candidates, strconv.FormatBool(g))
	}
	for _, c := range candidates {
		if k.fits(params, loc, c) {
			return c
		}
	}
	return nil
}

// numberRange is the range a number at loc must be in, as its two bounds, and the value
// meant when the number only has the wrong sign (-5000 for 5000).
func (k *Connector) numberRange(params map[string]any, loc []string) ([]any, any) {
	if len(loc) != 1 {
		return nil, nil
	}
	schema := k.params[loc[0]].schema
	lo, hasLo := schema["minimum"].(float64)
	hi, hasHi := schema["maximum"].(float64)
	if !hasLo || !hasHi {
		return nil, nil
	}
	bounds := []any{json.Number(strconv.FormatFloat(lo, 'f', -1, 64)), json.Number(strconv.FormatFloat(hi, 'f', -1, 64))}
	got, _ := valueAt(params, loc)
	n, ok := got.(json.Number)
	// A negative number is a slip of the sign, except -1, which other APIs use for "no
	// limit": what that means here is not one value.
	if !ok || !strings.HasPrefix(string(n), "-") || n == "-1" {
		return bounds, nil
	}
	flipped := json.Number(strings.TrimPrefix(string(n), "-"))
	if k.fits(params, loc, flipped) {
		return bounds, flipped
	}
	return bounds, nil
}

// suggestString is the string a string at loc obviously means in the param's format: a
// duration written for people in Go's form, a URL without its scheme with https://.
func (k *Connector) suggestString(params map[string]any, loc []string) string {
	got, ok := valueAt(params, loc)
	s, isStr := got.(string)
	if !ok || !isStr || len(loc) != 1 {
		return ""
	}
	schema := k.params[loc[0]].schema
	var candidate string
	switch {
	case schema["format"] == "go-duration":
		if d, ok := repair.HumanDuration(s); ok && d > 0 {
			candidate = repair.FormatDuration(d)
		}
	case loc[0] == "url" && !strings.Contains(s, "://") && !strings.ContainsAny(strings.TrimSpace(s), " \t\n") && strings.Contains(s, "."):
		candidate = "https://" + strings.TrimLeft(strings.TrimSpace(s), "/")
	}
	if candidate == "" || candidate == s || !k.fits(params, loc, candidate) {
		return ""
	}
	return candidate
}
