package wire

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PageRule is the limit rule of one list endpoint.
type PageRule struct {
	// Kind names the endpoint's cursor so that a cursor from another list is refused.
	Kind         string
	DefaultLimit int
	MaxLimit     int
	// scope binds cursors to one instance of the list (see Scoped); "" for none.
	scope string
}

// ListRule is the rule of every list but the logs: default 50, at most 500.
func ListRule(kind string) PageRule { return PageRule{Kind: kind, DefaultLimit: 50, MaxLimit: 500} }

// LogsRule is the logs endpoint's rule: default 100, at most 1000.
func LogsRule(kind string) PageRule { return PageRule{Kind: kind, DefaultLimit: 100, MaxLimit: 1000} }

// Scoped returns the rule with its cursors bound to scope: what makes one instance of the list
// (its parent resource, its filters, the caller's organization). A cursor is a position in
// one instance; replayed on another (a run's logs cursor on another run, a ?workflowId=X
// cursor with ?workflowId=Y) it would silently skip items, so ParsePage refuses it as a cursor
// this endpoint did not issue. The scope travels as a hash: cursors stay short and opaque.
func (rule PageRule) Scoped(scope ...string) PageRule {
	b, _ := json.Marshal(scope) // strings always marshal; the JSON array keeps parts apart
	sum := sha256.Sum256(b)
	rule.scope = base64.RawURLEncoding.EncodeToString(sum[:12])
	return rule
}

// Page is a parsed ?after=&limit= pair. After holds the position the cursor encodes, nil on
// the first page.
type Page struct {
	After []string
	Limit int
}

// PageError says why a query was refused; the HTTP layer answers it 400 invalid_query.
type PageError struct{ Message string }

func (e *PageError) Error() string { return e.Message }

// cursor is what an opaque cursor carries: the endpoint kind, the list's scope and the sort key
// of the last item.
type cursor struct {
	K string   `json:"k"`
	S string   `json:"s,omitempty"`
	P []string `json:"p"`
}

// PlainText reports whether s is UTF-8 text without control characters: what an id, a key or
// a name a client sends must be before it reaches Postgres, which refuses NUL and bytes that
// are not UTF-8 in text (a header, a path or a forged cursor may carry any byte).
func PlainText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// plainPosition reports whether a cursor's position is what EncodeCursor writes: short plain
// text. Cursors are not signed, so a forged one may hold anything.
func plainPosition(position []string) bool {
	for _, v := range position {
		if len(v) > 200 || !PlainText(v) {
			return false
		}
	}
	return true
}

// EncodeCursor makes the opaque cursor that resumes rule's list after position.
func (rule PageRule) EncodeCursor(position ...string) string {
	b, _ := json.Marshal(cursor{K: rule.Kind, S: rule.scope, P: position}) // strings always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParsePage reads after and limit from q. A limit outside [1, MaxLimit] is refused, never
// clamped, and so is a cursor this endpoint did not issue, or issued under another scope.
func (rule PageRule) ParsePage(q url.Values) (Page, error) {
	p := Page{Limit: rule.DefaultLimit}
	if raw, ok := q["limit"]; ok {
		n, err := strconv.Atoi(raw[0])
		if err != nil || n < 1 || n > rule.MaxLimit {
			return Page{}, &PageError{Message: fmt.Sprintf("limit must be an integer from 1 to %d", rule.MaxLimit)}
		}
		p.Limit = n
	}
	if raw, ok := q["after"]; ok {
		b, err := base64.RawURLEncoding.DecodeString(raw[0])
		var c cursor
		if err != nil || json.Unmarshal(b, &c) != nil || c.K != rule.Kind || c.S != rule.scope || len(c.P) == 0 || !plainPosition(c.P) {
			return Page{}, &PageError{Message: "after must be a nextCursor returned by this list"}
		}
		p.After = c.P
	}
	return p, nil
}
