package workflow

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
		if n, ok := numberIn(s, strings.HasSuffix(name, "_ms")); ok {
			candidates = append(candidates, n)
		}
		if strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") {
			var v any
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			if dec.Decode(&v) == nil && !dec.More() {
				candidates = append(candidates, v)
			}
		} else if m := headerLines(s); m != nil {
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

// numberIn reads a number written as a string: "2000", and for a param in milliseconds a
// duration ("30s", "5000ms", "2 seconds") as its milliseconds.
func numberIn(s string, millis bool) (json.Number, bool) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return json.Number(strconv.FormatFloat(f, 'f', -1, 64)), true
	}
	if !millis {
		return "", false
	}
	d, ok := humanDuration(s)
	if !ok || d%time.Millisecond != 0 {
		return "", false
	}
	return json.Number(strconv.FormatInt(d.Milliseconds(), 10)), true
}

var headerLine = regexp.MustCompile(`^([A-Za-z0-9!#$%&'*+.^_|~-]+)\s*:\s*(.*)$`)

// headerLines reads "Name: value" lines as an object of headers, or nil.
func headerLines(s string) map[string]any {
	m := map[string]any{}
	for _, ln := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		g := headerLine.FindStringSubmatch(strings.TrimSpace(ln))
		if g == nil || strings.Contains(g[1], "/") {
			return nil
		}
		m[g[1]] = strings.TrimSpace(g[2])
	}
	if len(m) == 0 {
		return nil
	}
	return m
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
		if d, ok := humanDuration(s); ok && d > 0 {
			candidate = formatDuration(d)
		}
	case loc[0] == "url" && !strings.Contains(s, "://") && !strings.ContainsAny(strings.TrimSpace(s), " \t\n") && strings.Contains(s, "."):
		candidate = "https://" + strings.TrimLeft(strings.TrimSpace(s), "/")
	}
	if candidate == "" || candidate == s || !k.fits(params, loc, candidate) {
		return ""
	}
	return candidate
}

// ---------------------------------------------------------------------------------------------
// Durations

var isoDuration = regexp.MustCompile(`^p(?:(\d+(?:\.\d+)?)w)?(?:(\d+(?:\.\d+)?)d)?(?:t(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?)?$`)

// humanDuration reads a duration written for people or in ISO 8601: "5 minutes", "two hours",
// "1 hour and 30 minutes", "30sec", "1.5 hours", "P1D", "PT30S", "30S". It reads only what has
// one meaning: a number without a unit ("30", "2h30") is not read, nor are months or years.
func humanDuration(s string) (time.Duration, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > 100 {
		return 0, false
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	if g := isoDuration.FindStringSubmatch(s); g != nil && s != "p" && s != "pt" && !strings.HasSuffix(s, "t") {
		units := []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second}
		var total float64
		for i, u := range units {
			if g[i+1] != "" {
				f, _ := strconv.ParseFloat(g[i+1], 64)
				total += f * float64(u)
			}
		}
		return checkedDuration(total)
	}
	return wordsDuration(s)
}

var durationToken = regexp.MustCompile(`^(\d+(?:\.\d+)?)([a-zµ]*)$`)

// wordsDuration reads (number unit)+ where the number is digits or a word and the unit a word
// or an abbreviation, separated by spaces, commas or "and".
func wordsDuration(s string) (time.Duration, bool) {
	s = strings.NewReplacer(",", " ", "-", " ").Replace(s)
	if strings.HasPrefix(s, "half an hour") || s == "half hour" {
		return 30 * time.Minute, true
	}
	var tokens []string
	for _, f := range strings.Fields(s) {
		if f == "and" {
			continue
		}
		if g := durationToken.FindStringSubmatch(f); g != nil && g[2] != "" {
			tokens = append(tokens, g[1], g[2])
			continue
		}
		tokens = append(tokens, f)
	}
	if len(tokens) == 0 || len(tokens)%2 != 0 {
		return 0, false
	}
	var total float64
	for i := 0; i < len(tokens); i += 2 {
		n, ok := numberWord(tokens[i])
		u, ok2 := durationUnit(tokens[i+1])
		if !ok || !ok2 {
			return 0, false
		}
		total += n * float64(u)
	}
	return checkedDuration(total)
}

func checkedDuration(ns float64) (time.Duration, bool) {
	if ns <= 0 || ns > float64(math.MaxInt64) {
		return 0, false
	}
	return time.Duration(ns), true
}

func numberWord(w string) (float64, bool) {
	if f, err := strconv.ParseFloat(w, 64); err == nil && f >= 0 {
		return f, true
	}
	words := map[string]float64{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
		"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
		"thirty": 30, "forty": 40, "fortyfive": 45, "fifty": 50, "sixty": 60, "ninety": 90, "half": 0.5}
	f, ok := words[w]
	return f, ok
}

func durationUnit(u string) (time.Duration, bool) {
	switch u {
	case "ns", "nanosecond", "nanoseconds":
		return time.Nanosecond, true
	case "us", "µs", "microsecond", "microseconds":
		return time.Microsecond, true
	case "ms", "msec", "msecs", "millis", "milli", "millisecond", "milliseconds":
		return time.Millisecond, true
	case "s", "sec", "secs", "second", "seconds":
		return time.Second, true
	case "m", "min", "mins", "minute", "minutes":
		return time.Minute, true
	case "h", "hr", "hrs", "hour", "hours":
		return time.Hour, true
	case "d", "day", "days":
		return 24 * time.Hour, true
	case "w", "wk", "wks", "week", "weeks":
		return 7 * 24 * time.Hour, true
	}
	return 0, false
}

// formatDuration writes d the way people write Go durations: "5m", "1h30m", "24h", "500ms",
// without Go's zero units ("5m0s").
func formatDuration(d time.Duration) string {
	if d%time.Millisecond != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10) + u.name)
			d -= n * u.d
		}
	}
	return b.String()
}
