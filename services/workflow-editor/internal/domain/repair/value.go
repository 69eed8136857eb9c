package repair

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Values written for people: where a value a model sent has one obvious meaning in a param's
// type or format ("2000" for the integer 2000, "5 minutes" for the duration 5m), these read
// it. The catalog checks each against the param's schema before it offers it.

// Number reads a number written as a string: "2000", and for a param in milliseconds a
// duration ("30s", "5000ms", "2 seconds") as its milliseconds.
func Number(s string, millis bool) (json.Number, bool) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return json.Number(strconv.FormatFloat(f, 'f', -1, 64)), true
	}
	if !millis {
		return "", false
	}
	d, ok := HumanDuration(s)
	if !ok || d%time.Millisecond != 0 {
		return "", false
	}
	return json.Number(strconv.FormatInt(d.Milliseconds(), 10)), true
}

var headerLine = regexp.MustCompile(`^([A-Za-z0-9!#$%&'*+.^_|~-]+)\s*:\s*(.*)$`)

// HeaderLines reads "Name: value" lines as an object of headers, or nil.
func HeaderLines(s string) map[string]any {
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

// ---------------------------------------------------------------------------------------------
// Durations

var isoDuration = regexp.MustCompile(`^p(?:(\d+(?:\.\d+)?)w)?(?:(\d+(?:\.\d+)?)d)?(?:t(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?)?$`)

// HumanDuration reads a duration written for people or in ISO 8601: "5 minutes", "two hours",
// "1 hour and 30 minutes", "30sec", "1.5 hours", "P1D", "PT30S", "30S". It reads only what has
// one meaning: a number without a unit ("30", "2h30") is not read, nor are months or years.
func HumanDuration(s string) (time.Duration, bool) {
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

// FormatDuration writes d the way people write Go durations: "5m", "1h30m", "24h", "500ms",
// without Go's zero units ("5m0s").
func FormatDuration(d time.Duration) string {
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
