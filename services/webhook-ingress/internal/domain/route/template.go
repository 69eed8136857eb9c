package route

import (
	"fmt"
	"net/url"
	"strings"
)

// Template is a parsed route path: literal segments and :param segments, matched exactly.
type Template struct {
	raw      string
	segments []segment
}

type segment struct {
	literal string
	param   string // set for a :param segment
}

// ParseTemplate parses a path like "/events/:source". Every segment is non-empty; a param
// segment is ':' and a name of letters, digits and '_' used once.
func ParseTemplate(path string) (Template, error) {
	if !strings.HasPrefix(path, "/") || path == "/" {
		return Template{}, fmt.Errorf("%w: path %q must start with / and name at least one segment", ErrInvalid, path)
	}
	t := Template{raw: path}
	seen := map[string]bool{}
	for _, s := range strings.Split(path[1:], "/") {
		switch {
		case s == "":
			return Template{}, fmt.Errorf("%w: path %q has an empty segment", ErrInvalid, path)
		case strings.HasPrefix(s, ":"):
			name := s[1:]
			if !validParamName(name) {
				return Template{}, fmt.Errorf("%w: path %q: param %q must be letters, digits and _", ErrInvalid, path, s)
			}
			if seen[name] {
				return Template{}, fmt.Errorf("%w: path %q uses param %q twice", ErrInvalid, path, name)
			}
			seen[name] = true
			t.segments = append(t.segments, segment{param: name})
		default:
			if u, err := url.PathUnescape(s); err != nil || u != s || strings.ContainsAny(s, "?#") {
				return Template{}, fmt.Errorf("%w: path %q: segment %q must be plain text", ErrInvalid, path, s)
			}
			t.segments = append(t.segments, segment{literal: s})
		}
	}
	return t, nil
}

func validParamName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		letter := ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && c != '_' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// String is the template as written.
func (t Template) String() string { return t.raw }

// Match matches an escaped path (url.URL.EscapedPath, relative to /api/webhooks) and returns
// the params. Segments are split before they are unescaped, so "%2F" inside a param value never
// makes a new segment; a param takes exactly one non-empty segment, so "/x/:p" matches "/x/v"
// but neither "/x/v/more" nor "/x/" nor "/x/v/".
func (t Template) Match(escapedPath string) (map[string]string, bool) {
	if !strings.HasPrefix(escapedPath, "/") {
		return nil, false
	}
	parts := strings.Split(escapedPath[1:], "/")
	if len(parts) != len(t.segments) {
		return nil, false
	}
	var params map[string]string
	for i, s := range t.segments {
		v, err := url.PathUnescape(parts[i])
		if err != nil || v == "" {
			return nil, false
		}
		if s.param == "" {
			if v != s.literal {
				return nil, false
			}
			continue
		}
		if params == nil {
			params = make(map[string]string, 2)
		}
		params[s.param] = v
	}
	if params == nil {
		params = map[string]string{}
	}
	return params, true
}

// overlaps reports whether some path matches both templates, so that registering both for
// one method would make matching depend on order.
func (t Template) overlaps(o Template) bool {
	if len(t.segments) != len(o.segments) {
		return false
	}
	for i, s := range t.segments {
		os := o.segments[i]
		if s.param == "" && os.param == "" && s.literal != os.literal {
			return false
		}
	}
	return true
}

// OpenAPIPath is the template in OpenAPI's form: "/events/{source}".
func (t Template) OpenAPIPath() string {
	var b strings.Builder
	for _, s := range t.segments {
		b.WriteByte('/')
		if s.param != "" {
			b.WriteString("{" + s.param + "}")
		} else {
			b.WriteString(s.literal)
		}
	}
	return b.String()
}
