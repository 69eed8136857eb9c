package connectors

import (
	"errors"
	"strings"
)

// ErrUnclosedTemplate is a "{{" without its "}}".
var ErrUnclosedTemplate = errors.New(`"{{" is not closed by "}}"`) //nolint:gochecknoglobals // sentinel

// Segment is one piece of a templated string param: literal text, or the
// expression of one {{ expr }}, trimmed.
type Segment struct {
	Text string
	Expr bool
}

// SplitTemplate cuts s into literal text and {{ expr }} expressions, in order. The editor
// (which checks the expressions) and the orchestrator (which evaluates them) read the syntax
// through this one function. On an unclosed "{{" it returns the segments before it and
// ErrUnclosedTemplate.
func SplitTemplate(s string) ([]Segment, error) {
	var out []Segment
	for {
		start := strings.Index(s, "{{")
		if start < 0 {
			if s != "" {
				out = append(out, Segment{Text: s})
			}
			return out, nil
		}
		if start > 0 {
			out = append(out, Segment{Text: s[:start]})
		}
		rest := s[start+2:]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return out, ErrUnclosedTemplate
		}
		out = append(out, Segment{Text: strings.TrimSpace(rest[:end]), Expr: true})
		s = rest[end+2:]
	}
}
