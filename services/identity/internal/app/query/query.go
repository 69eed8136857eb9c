// Package query holds identity's read-only use cases, one file each: who the caller is, the
// gateway's credential resolution, the lookup of an organization by slug (for other services),
// and listings of organizations, members and API keys.
package query
