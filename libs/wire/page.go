package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
)

// PageRule is the limit rule of one list endpoint.
type PageRule struct {
	// Kind names the endpoint's cursor so that a cursor from another list is refused.
	Kind         string
	DefaultLimit int
	MaxLimit     int
}

// ListRule is the rule of every list but the logs: default 50, at most 500.
func ListRule(kind string) PageRule { return PageRule{Kind: kind, DefaultLimit: 50, MaxLimit: 500} }

// LogsRule is the logs endpoint's rule: default 100, at most 1000.
func LogsRule(kind string) PageRule { return PageRule{Kind: kind, DefaultLimit: 100, MaxLimit: 1000} }

// Page is a parsed ?after=&limit= pair. After holds the position the cursor encodes, nil on
// the first page.
type Page struct {
	After []string
	Limit int
}

// PageError says why a query was refused; the HTTP layer answers it 400 invalid_query.
type PageError struct{ Message string }

func (e *PageError) Error() string { return e.Message }

// cursor is what an opaque cursor carries: the endpoint kind and the sort key of the last item.
type cursor struct {
	K string   `json:"k"`
	P []string `json:"p"`
}

// EncodeCursor makes the opaque cursor that resumes rule's list after position.
func (rule PageRule) EncodeCursor(position ...string) string {
	b, _ := json.Marshal(cursor{K: rule.Kind, P: position}) // strings always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParsePage reads after and limit from q. A limit outside [1, MaxLimit] is refused, never
// clamped, and so is a cursor this endpoint did not issue.
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
		if err != nil || json.Unmarshal(b, &c) != nil || c.K != rule.Kind || len(c.P) == 0 {
			return Page{}, &PageError{Message: "after must be a nextCursor returned by this list"}
		}
		p.After = c.P
	}
	return p, nil
}
