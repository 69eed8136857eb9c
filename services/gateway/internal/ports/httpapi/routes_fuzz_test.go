package httpapi

import (
	"strings"
	"testing"
)

// FuzzRouting feeds arbitrary paths to the guard's path handling: cleanPath must yield a
// canonical absolute path, and only the open paths may skip the guard.
func FuzzRouting(f *testing.F) {
	for _, p := range []string{
		"", "/", "//", "/health", "/health/", "/healthz", "/api/bootstrap", "/api/bootstrap/",
		"/api/auth/", "/api/auth", "/api/auth/sign-in/email", "/api/auth/../workflows",
		"/api/auth/./../runs", "/api//workflows", "/api/webhooks/", "/api/webhooks/../runs",
		"/api/webhooks/a/../../runs", "/api/workflows/wf_1/run", "/api/workflows//run",
		"/api/workflows/wf_1/runs/", "api/auth/x", "../api/auth/x", "/./api/auth/x",
		"/api/auth/..", "/api/auth/.", "/api/auth/...", "/api/auth/x/..", "/a/b/../../..",
		"*", "/%2e%2e/api/auth", "/api/auth/\x00", "/api/auth//", "\\api\\auth\\x",
	} {
		f.Add(p)
	}
	routes := table()

	f.Fuzz(func(t *testing.T, raw string) {
		c := cleanPath(raw)
		if !strings.HasPrefix(c, "/") {
			t.Fatalf("cleanPath(%q) = %q: not absolute", raw, c)
		}
		for _, bad := range []string{"/../", "/./", "//"} {
			if strings.Contains(c, bad) {
				t.Fatalf("cleanPath(%q) = %q: contains %q", raw, c, bad)
			}
		}
		if strings.HasSuffix(c, "/..") || strings.HasSuffix(c, "/.") {
			t.Fatalf("cleanPath(%q) = %q: ends in a dot segment", raw, c)
		}
		if again := cleanPath(c); again != c {
			t.Fatalf("cleanPath not idempotent: %q -> %q -> %q", raw, c, again)
		}

		openByRule := c == "/health" || c == "/api/bootstrap" ||
			strings.HasPrefix(c, "/api/auth/") || strings.HasPrefix(c, "/api/webhooks/")
		open := isOpen(routes, c)
		if open && !openByRule {
			t.Fatalf("isOpen(%q) (from %q) = true, but it is not an open path", c, raw)
		}
		r, ok := match(routes, c)
		if ok && r.Open && !openByRule {
			t.Fatalf("match(%q) (from %q) = open route %+v, but it is not an open path", c, raw, r)
		}
		if ok && r.Open != open {
			t.Fatalf("isOpen(%q) = %v but its route says Open=%v", c, open, r.Open)
		}
		// And the converse: everything under the open prefixes is open.
		strictlyUnder := func(prefix string) bool { return strings.HasPrefix(c, prefix) && len(c) > len(prefix) }
		if (c == "/health" || c == "/api/bootstrap" || strictlyUnder("/api/auth/") || strictlyUnder("/api/webhooks/")) && !open {
			t.Fatalf("isOpen(%q) (from %q) = false for an open path", c, raw)
		}
	})
}
