package apiclient

import (
	"context"
	"net/http"
	"net/url"
)

// The calls below serve the CLI's session housekeeping: checking that a saved key still works
// before minting another, and ending a session on logout.

// CheckAPIKey makes the cheapest authenticated call there is with key (one workflow of the
// list, GET /api/workflows?limit=1): nil when the API accepts the key, else its *Error
// (401 unauthorized for a revoked or unknown key).
func (c *Client) CheckAPIKey(ctx context.Context, key string) error {
	_, err := c.get(ctx, key, "/api/workflows", url.Values{"limit": {"1"}})
	return err
}

// SignOut ends the session the cookie carries (POST /api/auth/sign-out).
func (c *Client) SignOut(ctx context.Context, cookie string) error {
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/auth/sign-out", auth: Auth{Cookie: cookie}, body: struct{}{}})
	return err
}
