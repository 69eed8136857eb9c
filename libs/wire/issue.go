package wire

import (
	"strconv"
	"strings"
)

// Issue is one problem of an invalid request body, located by a JSON Pointer (RFC 6901).
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	// DidYouMean is the value meant, when one is the obvious fix (an unknown member's
	// intended name).
	DidYouMean string `json:"did_you_mean,omitempty"`
}

// Pointer builds a JSON Pointer from reference tokens, escaping "~" and "/".
func Pointer(tokens ...any) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		switch v := t.(type) {
		case int:
			b.WriteString(strconv.Itoa(v))
		case string:
			b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(v))
		default:
			panic("pointer token must be int or string")
		}
	}
	return b.String()
}
