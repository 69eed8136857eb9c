package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply a client's JSON may nest objects and arrays. Definitions, inputs
// and payloads need a handful of levels; the bound keeps a hostile body from costing stack and
// time in every service that walks it, and from reaching encoding/json's own limit, whose
// error ("exceeded max depth") says nothing a client can act on.
const MaxJSONDepth = 64

// JSONError is the first place where a client's JSON breaks the boundary's rules: Pointer is
// the JSON Pointer of the offending value ("" for the body itself), Message says what to
// change.
type JSONError struct {
	Pointer string
	Message string
}

func (e *JSONError) Error() string {
	if e.Pointer == "" {
		return e.Message
	}
	return e.Pointer + ": " + e.Message
}

// CheckJSON applies the one set of rules every JSON value a client sends passes, whatever it
// is for (request bodies, run input, signal payloads, schedule input, block params, webhook
// bodies), before anything decodes or stores it:
//   - the bytes are UTF-8 (encoding/json would silently turn bad bytes into U+FFFD);
//   - objects and arrays nest at most MaxJSONDepth levels;
//   - no object has the same member twice (decoders disagree on which copy wins);
//   - no string holds U+0000 or half of a UTF-16 surrogate pair (\u0000, a lone \ud800):
//     Postgres stores neither, and the second is no character at all;
//   - every number is a 64-bit float: 1e309 or -1e400 (out of range) and 1e-400 (a non-zero
//     number that would become 0) are refused, and so is an integer literal past ±2^53
//     (123456789012345678901234567890): templates, outputs and every client that parses JSON
//     into doubles would silently change its digits. Such values travel as strings. (A float
//     literal such as 1e20 is a float, and is kept as one.)
//
// Syntax errors are left to the decoder that follows; CheckJSON reports nil for them.
func CheckJSON(raw []byte) *JSONError {
	if !utf8.Valid(raw) {
		off := invalidUTF8At(raw)
		return &JSONError{Pointer: PointerAt(raw, stringEnd(raw, off)), Message: fmt.Sprintf("body is not valid UTF-8 (bad byte at offset %d); send text as UTF-8", off)}
	}
	if off, msg := badEscape(raw); msg != "" {
		return &JSONError{Pointer: PointerAt(raw, stringEnd(raw, off)), Message: msg}
	}
	w := newWalker(raw)
	w.dec.UseNumber()
	for {
		tok, name, err := w.next()
		if err != nil {
			return nil //nolint:nilerr // the end, or a syntax error: the decoder that follows reports it
		}
		if name {
			k, f := tok.(string), &w.stack[len(w.stack)-1]
			if _, dup := f.seen[k]; dup {
				return &JSONError{Pointer: w.pointer(), Message: fmt.Sprintf("member %q appears more than once in this object; send it once", k)}
			}
			if f.seen == nil {
				f.seen = map[string]struct{}{}
			}
			f.seen[k] = struct{}{}
			continue
		}
		switch tok := tok.(type) {
		case json.Delim:
			if (tok == '{' || tok == '[') && len(w.stack) >= MaxJSONDepth {
				return &JSONError{Pointer: w.pointer(), Message: fmt.Sprintf("JSON nests more than %d levels of objects and arrays here; flatten it", MaxJSONDepth)}
			}
		case json.Number:
			if msg := checkNumber(string(tok)); msg != "" {
				return &JSONError{Pointer: w.pointer(), Message: msg}
			}
		}
		w.step(tok)
	}
}

// walker reads a JSON value token by token and knows where it stands: CheckJSON and
// PointerAt walk the same way and name places the same way.
type walker struct {
	dec   *json.Decoder
	stack []jsonFrame
}

func newWalker(raw []byte) *walker { return &walker{dec: json.NewDecoder(bytes.NewReader(raw))} }

// next reads a token. A member name is recorded at once (name is true); the walk stands at
// any other token until step moves past it.
func (w *walker) next() (tok json.Token, name bool, err error) {
	if tok, err = w.dec.Token(); err != nil {
		return nil, false, err
	}
	if n := len(w.stack); n > 0 && !w.stack[n-1].array && w.stack[n-1].expectKey {
		if k, ok := tok.(string); ok {
			w.stack[n-1].key, w.stack[n-1].expectKey = k, false
			return tok, true, nil
		}
	}
	return tok, false, nil
}

// step moves past tok, a token next returned that is not a member name.
func (w *walker) step(tok json.Token) {
	switch tok {
	case json.Delim('}'), json.Delim(']'):
		w.stack = w.stack[:len(w.stack)-1]
		endValue(w.stack)
	case json.Delim('{'):
		w.stack = append(w.stack, jsonFrame{expectKey: true})
	case json.Delim('['):
		w.stack = append(w.stack, jsonFrame{array: true})
	default:
		endValue(w.stack)
	}
}

// pointer is the JSON Pointer of where the walk stands. Between members, an object's pointer
// is its own.
func (w *walker) pointer() string {
	tokens := make([]any, 0, len(w.stack))
	for _, f := range w.stack {
		switch {
		case f.array:
			tokens = append(tokens, f.index)
		case !f.expectKey:
			tokens = append(tokens, f.key)
		}
	}
	return Pointer(tokens...)
}

// jsonFrame is one open object or array of a walk; seen (CheckJSON's) holds an object's member names.
type jsonFrame struct {
	array     bool
	index     int
	key       string
	expectKey bool
	seen      map[string]struct{}
}

// endValue moves the enclosing container on after one of its values ended.
func endValue(stack []jsonFrame) {
	if n := len(stack); n > 0 {
		if stack[n-1].array {
			stack[n-1].index++
		} else {
			stack[n-1].expectKey = true
		}
	}
}

// checkNumber says what is wrong with a JSON number literal, or "".
func checkNumber(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Sprintf("number %s is outside the range of a 64-bit float (about ±1.8e308); send a smaller number, or a string", short(s))
	}
	integer := !strings.ContainsAny(s, ".eE")
	if f == 0 && strings.ContainsAny(mantissa(s), "123456789") {
		return fmt.Sprintf("number %s is too small for a 64-bit float and would become 0; send 0, or a string", short(s))
	}
	if integer && !exactInteger(s) {
		return fmt.Sprintf("integer %s has more digits than a 64-bit float keeps exactly (integers up to ±9007199254740992 fit); send it as a string", short(s))
	}
	return ""
}

func mantissa(s string) string {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		return s[:i]
	}
	return s
}

// maxExactInteger is 2^53: every integer up to it, and none past it, has a float of its own.
const maxExactInteger = 1 << 53

// exactInteger reports whether the decimal integer literal s is within ±2^53. Past that, some
// integers have no float of their own, and those that do may come back with other digits
// (encoders print a float's shortest form: 20000000000000112 becomes 20000000000000110).
func exactInteger(s string) bool {
	digits := strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
	if len(digits) <= 15 {
		return true
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return err == nil && n <= maxExactInteger
}

// short keeps an error message readable for a number of ten thousand digits.
func short(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

func invalidUTF8At(raw []byte) int {
	for i := 0; i < len(raw); {
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(raw)
}

// badEscape finds a \u escape that names no storable character: U+0000, or a surrogate
// that is not half of a high-low pair. It returns the escape's offset and what is wrong.
func badEscape(raw []byte) (int, string) {
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			in = !in
		case c == '\\' && in:
			if i+1 >= len(raw) || raw[i+1] != 'u' {
				i++ // a one-character escape
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				return 0, "" // a syntax error, the decoder's to report
			}
			switch {
			case r == 0:
				return i, "strings may not hold U+0000 (\\u0000): it cannot be stored; remove it"
			case r >= 0xDC00 && r <= 0xDFFF:
				return i, fmt.Sprintf("\\u%04x is the second half of a UTF-16 surrogate pair without its first half; send the whole character", r)
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := rune(0), i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u'
				if ok {
					low, ok = hex4(raw, i+8)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return i, fmt.Sprintf("\\u%04x is the first half of a UTF-16 surrogate pair without its second half; send the whole character", r)
				}
				i += 11
				continue
			}
			i += 5
		}
	}
	return 0, ""
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// stringEnd is the offset just past the string that holds raw[off] (bad bytes can only be
// inside a string of valid JSON).
func stringEnd(raw []byte, off int) int64 {
	for i := off; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return int64(i + 1)
		}
	}
	return int64(len(raw))
}

// PointerAt returns the JSON Pointer of the value that ends at offset (the offset
// encoding/json's type errors carry: its own error paths leave out array indexes, which a
// client needs to find the bad element). Bytes past a syntax error give the last value that
// parsed.
func PointerAt(raw []byte, offset int64) string {
	w := newWalker(raw)
	best := ""
	for {
		tok, name, err := w.next()
		if err != nil || w.dec.InputOffset() > offset {
			return best
		}
		if name {
			continue
		}
		if tok != json.Delim('}') && tok != json.Delim(']') {
			best = w.pointer()
		}
		w.step(tok)
	}
}
