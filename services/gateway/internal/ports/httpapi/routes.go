// Package httpapi is the gateway's public surface: the auth guard that runs before routing, the
// routing table (the services and their routes: docs/ARCHITECTURE.md, "Services"), the rate
// limit, the reverse proxy that forwards each request with the resolved identity signed into
// its headers, the routes the gateway answers itself (/health, the OpenAPI document, the
// console, /api/mcp), and the one error table in errors.go.
package httpapi

import (
	"path"
	"strings"
)

// Peer names a service the gateway forwards to.
type Peer string

// The services behind the gateway.
const (
	Identity     Peer = "identity"
	Editor       Peer = "workflow-editor"
	Orchestrator Peer = "run-orchestrator"
	Scheduler    Peer = "scheduler"
	Webhook      Peer = "webhook-ingress"
)

// route sends the paths it matches to a peer. A path matches when it equals Exact, or has
// the segments of Pattern ("*" matches one segment), or starts with Prefix.
type route struct {
	Exact   string
	Pattern []string
	Prefix  string
	Peer    Peer
	// Open routes skip the guard: the auth layer's own routes and the bootstrap, which identity
	// checks itself, and the webhooks, which carry their own signatures.
	Open bool
}

// table is the routing table, most specific first.
func table() []route {
	return []route{
		{Exact: "/api/bootstrap", Peer: Identity, Open: true},
		{Prefix: "/api/auth/", Peer: Identity, Open: true},
		{Prefix: "/api/webhooks/", Peer: Webhook, Open: true},
		{Pattern: []string{"api", "workflows", "*", "run"}, Peer: Orchestrator},
		{Pattern: []string{"api", "workflows", "*", "runs"}, Peer: Orchestrator},
		{Exact: "/api/workflows", Peer: Editor},
		{Prefix: "/api/workflows/", Peer: Editor},
		{Exact: "/api/connectors", Peer: Editor},
		{Exact: "/api/runs", Peer: Orchestrator},
		{Prefix: "/api/runs/", Peer: Orchestrator},
		{Pattern: []string{"api", "organizations", "*", "retention"}, Peer: Orchestrator},
		{Exact: "/api/schedules", Peer: Scheduler},
		{Prefix: "/api/schedules/", Peer: Scheduler},
		{Exact: "/api/admin/tick", Peer: Scheduler},
	}
}

// name is the route as spans show it: "/api/workflows/*/run", "/api/runs/*" — never an id.
func (r route) name() string {
	switch {
	case r.Exact != "":
		return r.Exact
	case r.Prefix != "":
		return r.Prefix + "*"
	default:
		return "/" + strings.Join(r.Pattern, "/")
	}
}

func (r route) matches(p string, segments []string) bool {
	switch {
	case r.Exact != "":
		return p == r.Exact
	case r.Prefix != "":
		return strings.HasPrefix(p, r.Prefix) && len(p) > len(r.Prefix)
	default:
		if len(segments) != len(r.Pattern) {
			return false
		}
		for i, s := range r.Pattern {
			if s != "*" && s != segments[i] {
				return false
			}
		}
		return true
	}
}

// match returns the route for a clean path, if any.
func match(routes []route, p string) (route, bool) {
	segments := strings.Split(strings.Trim(p, "/"), "/")
	for _, r := range routes {
		if r.matches(p, segments) {
			return r, true
		}
	}
	return route{}, false
}

// isOpen reports whether p skips the guard. It is decided on the path alone, before any
// route is looked up, so that an unknown path without credentials is 401, not 404.
func isOpen(routes []route, p string) bool {
	if p == "/health" || p == openAPIPath {
		return true
	}
	r, ok := match(routes, p)
	return ok && r.Open
}

// cleanPath resolves "." and ".." and doubled slashes, keeping a trailing slash, so that a
// path cannot look open to the guard and mean something else to the service.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}
