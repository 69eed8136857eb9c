package httpapi

import (
	"strings"
	"testing"
)

// FuzzETagMatches feeds arbitrary If-None-Match headers to the document route's check: it
// never panics, and it matches only when one listed tag (weak or not) is the ETag or "*".
func FuzzETagMatches(f *testing.F) {
	const etag = `"0123456789abcdef0123456789abcdef"`
	for _, h := range []string{"", "*", etag, "W/" + etag, `"x", ` + etag, ` ` + etag + ` `, `"x"`, `W/"x"`, ",,,", `"`, "W/", "W/*", etag[1:]} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		got := etagMatches(header, etag)
		want := false
		for _, v := range strings.Split(header, ",") {
			v = strings.TrimSpace(v)
			if v == "*" || v == etag || v == "W/"+etag {
				want = true
			}
		}
		if got != want {
			t.Fatalf("etagMatches(%q) = %v, want %v", header, got, want)
		}
	})
}
