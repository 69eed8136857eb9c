package repair

import (
	"regexp"
	"strings"
)

// ---------------------------------------------------------------------------------------------
// Scanning expressions

// Chain is a dotted name in an expression's source: "steps.fetch.output.body".
type Chain struct {
	Start, End int // its offsets in the source
	Parts      []string
	Call       bool // followed by "(": a function or a method called
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdentByte(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// Chains lists the dotted names of src outside its string literals.
func Chains(src string) []Chain {
	var out []Chain
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(src, i)
			continue
		case c >= '0' && c <= '9':
			for i < len(src) && (isIdentByte(src[i]) || src[i] == '.') {
				i++
			}
			continue
		case !isIdentStart(c):
			i++
			continue
		}
		if prev := lastNonSpace(src[:i]); prev == '.' || prev == '?' && i >= 2 && strings.HasSuffix(strings.TrimRight(src[:i], " "), "?.") {
			for i < len(src) && isIdentByte(src[i]) {
				i++
			}
			continue
		}
		ch := Chain{Start: i}
		for {
			j := i
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			ch.Parts = append(ch.Parts, src[i:j])
			i = j
			if i+1 < len(src) && src[i] == '.' && isIdentStart(src[i+1]) {
				i++
				continue
			}
			break
		}
		ch.End = i
		rest := strings.TrimLeft(src[i:], " ")
		ch.Call = strings.HasPrefix(rest, "(")
		out = append(out, ch)
	}
	return out
}

func lastNonSpace(s string) byte {
	s = strings.TrimRight(s, " \t\n")
	if s == "" {
		return 0
	}
	return s[len(s)-1]
}

// skipString returns the index after the string literal starting at i.
func skipString(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch {
		case src[j] == '\\' && q != '`':
			j++
		case src[j] == q:
			return j + 1
		}
	}
	return len(src)
}

// codeParts splits src into code and string literals, for rewrites that must not touch the
// text of strings.
func codeParts(src string) (parts []string, isCode []bool) {
	start := 0
	for i := 0; i < len(src); {
		c := src[i]
		if c == '"' || c == '\'' || c == '`' {
			if i > start {
				parts, isCode = append(parts, src[start:i]), append(isCode, true)
			}
			j := skipString(src, i)
			parts, isCode = append(parts, src[i:j]), append(isCode, false)
			i, start = j, j
			continue
		}
		i++
	}
	if start < len(src) {
		parts, isCode = append(parts, src[start:]), append(isCode, true)
	}
	return parts, isCode
}

// ---------------------------------------------------------------------------------------------
// Slips from other languages

type wordFix struct {
	re   *regexp.Regexp
	with string
}

// syntaxFixes are the rewrites of code (never of strings) that slips from SQL, Python and
// JavaScript need; each leaves valid expr-lang as it is.
func syntaxFixes() []wordFix {
	return []wordFix{
		{regexp.MustCompile(`(?i)\bIS\s+NOT\s+(NULL|None|nil)\b`), "!= nil"},
		{regexp.MustCompile(`(?i)\bIS\s+(NULL|None|nil)\b`), "== nil"},
		{regexp.MustCompile(`===`), "=="},
		{regexp.MustCompile(`!==`), "!="},
		{regexp.MustCompile(`<>`), "!="},
		{regexp.MustCompile(`\bAND\b`), "and"},
		{regexp.MustCompile(`\bOR\b`), "or"},
		{regexp.MustCompile(`\bNOT\b`), "not"},
		{regexp.MustCompile(`\b(True|TRUE)\b`), "true"},
		{regexp.MustCompile(`\b(False|FALSE)\b`), "false"},
		{regexp.MustCompile(`\b(None|NULL|Null|null|undefined)\b`), "nil"},
	}
}

var (
	methodNoArg = regexp.MustCompile(`([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\.(toUpperCase|toLowerCase|toUpper|toLower|upper|lower|trim|strip|toString)\(\s*\)`)
	methodArg   = regexp.MustCompile(`([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\.(startsWith|endsWith)\(([^()]*)\)`)
	dangling    = regexp.MustCompile(`\s*(&&|\|\||\band\b|\bor\b|,)\s*$`)
)

// FixSyntax rewrites the slips of src; the result may still be invalid.
func FixSyntax(src string) string {
	s := strings.TrimSpace(src)
	parts, isCode := codeParts(s)
	fixes := syntaxFixes()
	for i, p := range parts {
		if !isCode[i] {
			continue
		}
		for _, f := range fixes {
			p = replaceNotMember(f.re, p, f.with)
		}
		if !strings.Contains(s, "let ") {
			p = doubleEquals(p)
		}
		parts[i] = p
	}
	s = strings.Join(parts, "")
	whole := func(m string) bool { return strings.TrimSpace(m) == strings.TrimSpace(s) }
	s = methodNoArg.ReplaceAllStringFunc(s, func(m string) string {
		g := methodNoArg.FindStringSubmatch(m)
		fn := map[string]string{"toUpperCase": "upper", "toLowerCase": "lower", "toUpper": "upper", "toLower": "lower",
			"upper": "upper", "lower": "lower", "trim": "trim", "strip": "trim", "toString": "string"}[g[2]]
		return fn + "(" + g[1] + ")"
	})
	s = methodArg.ReplaceAllStringFunc(s, func(m string) string {
		g := methodArg.FindStringSubmatch(m)
		out := g[1] + " " + g[2] + " " + strings.TrimSpace(g[3])
		if !whole(m) {
			out = "(" + out + ")"
		}
		return out
	})
	s = dangling.ReplaceAllString(s, "")
	return balance(s)
}

// replaceNotMember replaces the matches of re in code that are not a member name (".null").
func replaceNotMember(re *regexp.Regexp, code, with string) string {
	locs := re.FindAllStringIndex(code, -1)
	if locs == nil {
		return code
	}
	var b strings.Builder
	last := 0
	for _, l := range locs {
		b.WriteString(code[last:l[0]])
		if lastNonSpace(code[:l[0]]) == '.' {
			b.WriteString(code[l[0]:l[1]])
		} else {
			b.WriteString(with)
		}
		last = l[1]
	}
	b.WriteString(code[last:])
	return b.String()
}

// doubleEquals turns a lone "=" (an assignment in most languages, a comparison in SQL) into
// "==".
func doubleEquals(code string) string {
	var b strings.Builder
	for i := 0; i < len(code); i++ {
		c := code[i]
		if c == '=' {
			prev, next := byte(0), byte(0)
			if i > 0 {
				prev = code[i-1]
			}
			if i+1 < len(code) {
				next = code[i+1]
			}
			if !strings.ContainsRune("=!<>", rune(prev)) && next != '=' && next != '~' {
				b.WriteString("==")
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// balance closes the parentheses a grouping left open at the end, and drops closing ones
// with no opening at the end. An unclosed call ("len(x > 0") is left alone: where its ")"
// goes is not clear.
func balance(s string) string {
	parts, isCode := codeParts(s)
	var open []int // offsets of unclosed "("
	var extra []int
	off := 0
	for i, p := range parts {
		if isCode[i] {
			for j := 0; j < len(p); j++ {
				switch p[j] {
				case '(':
					open = append(open, off+j)
				case ')':
					if len(open) > 0 {
						open = open[:len(open)-1]
					} else {
						extra = append(extra, off+j)
					}
				}
			}
		}
		off += len(p)
	}
	if len(extra) > 0 {
		if len(open) > 0 || strings.Trim(s[extra[0]:], ") ") != "" {
			return s
		}
		return strings.TrimRight(s[:extra[0]], " ")
	}
	for _, o := range open {
		if prev := lastNonSpace(s[:o]); isIdentByte(prev) && !endsWithWord(s[:o], "and", "or", "not", "in") || prev == ')' || prev == ']' {
			return s
		}
	}
	return s + strings.Repeat(")", len(open))
}

func endsWithWord(s string, words ...string) bool {
	s = strings.TrimRight(s, " ")
	for _, w := range words {
		if strings.HasSuffix(s, w) && (len(s) == len(w) || !isIdentByte(s[len(s)-len(w)-1])) {
			return true
		}
	}
	return false
}
