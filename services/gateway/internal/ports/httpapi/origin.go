package httpapi

import (
	"context"
	"net/http"

	"svc.dev/libs/web"
)

// WithTrustedOrigins sets the origins whose pages may send state-changing requests that the
// session cookie authenticates: the public URL's and SVC_TRUSTED_ORIGINS, the same settings
// and defaults identity reads for its own Origin check.
func (g *Gateway) WithTrustedOrigins(o web.Origins) *Gateway {
	if o == nil {
		panic("nil origins")
	}
	g.origins = o
	return g
}

// cookieFromUntrustedPage reports whether r is a write (any method but GET, HEAD, OPTIONS)
// carrying a cookie that no trusted page is shown to have sent (web.Origins.SentByTrustedPage).
// A browser attaches the console's session cookie to any request a page makes it send, a
// form of another site or, past SameSite=Lax, of a sibling subdomain; it never lets that page
// set Authorization or x-api-key without a CORS preflight the gateway does not grant. So such
// a request may be authenticated by anything but its cookie. Identity's own routes check the
// Origin of every write themselves; the MCP tools' in-process requests were checked as the
// request that carried them (originVouched).
func (g *Gateway) cookieFromUntrustedPage(r *http.Request) bool {
	return r.Header.Get("Cookie") != "" && !web.SafeMethod(r.Method) && !originVouched(r.Context()) &&
		!g.origins.SentByTrustedPage(r)
}

type originVouchedKey struct{}

// withOriginVouched marks an in-process request of the MCP tools: its credentials are those of
// the POST /api/mcp that carried the call, which passed the guard (its cookie was dropped if
// its page was not trusted). Only the gateway can set a context value; a client cannot.
func withOriginVouched(ctx context.Context) context.Context {
	return context.WithValue(ctx, originVouchedKey{}, true)
}

func originVouched(ctx context.Context) bool {
	v, _ := ctx.Value(originVouchedKey{}).(bool)
	return v
}
