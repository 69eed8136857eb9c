package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/gateway/internal/app"
)

// The gateway's failures that carry nothing but their kind.
var (
	// errMethodNotAllowed is a path the gateway answers itself (/health, /api/openapi.json)
	// asked with a method it does not take.
	errMethodNotAllowed = errors.New("method not allowed")
	// errNoRoute is a path no route has, asked by a caller who passed the guard.
	errNoRoute = errors.New("no route has this path")
	// errNoCredentials is a guarded path asked with no cookie, bearer token or API key.
	errNoCredentials = errors.New("no credentials")
	// errUntrustedPage is a write the session cookie alone would authenticate, not shown to
	// come from a trusted page (origin.go).
	errUntrustedPage = errors.New("a cookie-authenticated write from an untrusted page")
	// errHandlerPanicked is an in-process API request of the MCP tools whose handler panicked
	// before it answered (mcp.go); the panic is logged where it was recovered.
	errHandlerPanicked = errors.New("the API handler panicked")
)

// identityUnavailableError is the guard's Resolve call that identity did not answer: the
// guard fails closed.
type identityUnavailableError struct{ err error }

func (e *identityUnavailableError) Error() string { return "resolve: " + e.err.Error() }
func (e *identityUnavailableError) Unwrap() error { return e.err }

// rejectedError is identity's rejection of the credentials (unauthorized,
// no_active_organization), relayed with identity's message.
type rejectedError struct {
	code    errs.Code
	message string
}

func (e *rejectedError) Error() string { return "rejected: " + string(e.code) + ": " + e.message }

// rateLimitedError is a guarded request its bucket had no token for.
type rateLimitedError struct{ retryAfterMs int64 }

func (e *rateLimitedError) Error() string {
	return fmt.Sprintf("rate limited; retry in %d ms", e.retryAfterMs)
}

// streamsFullError is an event stream past one of its ceilings (streams.go).
type streamsFullError struct{ ceiling app.StreamCeiling }

func (e *streamsFullError) Error() string {
	return fmt.Sprintf("%d event streams open for this %s", e.ceiling.Max, e.ceiling.Scope)
}

// upstreamError is a service the proxy could not reach or get an answer from; the proxy
// logged it with the peer.
type upstreamError struct {
	peer Peer
	err  error
}

func (e *upstreamError) Error() string { return string(e.peer) + ": " + e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// bodyTooLargeError is a body of unknown length that went past limit while buffered.
type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("request body is larger than %d bytes", e.limit)
}

// bodyUnreadableError is a body that could not be read to its end.
type bodyUnreadableError struct{ err error }

func (e *bodyUnreadableError) Error() string { return "read body: " + e.err.Error() }
func (e *bodyUnreadableError) Unwrap() error { return e.err }

// mcpMethodError is a request to /api/mcp with a method other than POST.
type mcpMethodError struct{ method string }

func (e *mcpMethodError) Error() string { return "mcp: method " + e.method }

// mcpAcceptError is a request to /api/mcp whose Accept does not take JSON.
type mcpAcceptError struct{ accept string }

func (e *mcpAcceptError) Error() string { return "mcp: Accept " + e.accept }

// mcpRefusedError is the MCP SDK's own refusal (a status of 400 or more with its text), to be
// answered as a public error.
type mcpRefusedError struct {
	status  int
	message string
}

func (e *mcpRefusedError) Error() string {
	return fmt.Sprintf("mcp handler answered %d: %s", e.status, e.message)
}

// toAppError is the gateway's one table from its failures to public errors (the codes and
// their statuses: docs/API.md, "The error codes"). A public error built elsewhere (libs/web's
// JSON boundary) passes as it is; anything else is internal, its cause logged, never sent.
func toAppError(err error) *errs.Error {
	var (
		public      *errs.Error
		unavailable *identityUnavailableError
		rejected    *rejectedError
		limited     *rateLimitedError
		streams     *streamsFullError
		upstream    *upstreamError
		tooLarge    *bodyTooLargeError
		unreadable  *bodyUnreadableError
		mcpMethod   *mcpMethodError
		mcpAccept   *mcpAcceptError
		mcpRefused  *mcpRefusedError
	)
	switch {
	case errors.Is(err, errMethodNotAllowed):
		return errs.New(errs.MethodNotAllowed, err)
	case errors.Is(err, errNoRoute):
		return errs.New(errs.NotFound, err)
	case errors.Is(err, errNoCredentials):
		return errs.Newf(errs.Unauthorized, "send a session cookie, Authorization: Bearer <token>, or x-api-key")
	case errors.Is(err, errUntrustedPage):
		return errs.Newf(errs.InvalidOrigin, "a request that changes state and is authenticated by the session cookie must come from a trusted origin "+
			"(Origin, or Sec-Fetch-Site: same-origin); other clients send Authorization: Bearer or x-api-key")
	case errors.Is(err, errHandlerPanicked):
		return errs.New(errs.InternalOnlyLog, err)
	case errors.As(err, &unavailable):
		return errs.New(errs.Unavailable, unavailable.err).WithMessage("authentication is unavailable; retry shortly")
	case errors.As(err, &rejected):
		return errs.Newf(rejected.code, "%s", rejected.message)
	case errors.As(err, &limited):
		return errs.Newf(errs.RateLimited, "rate limit reached for this principal; retry in %d ms", limited.retryAfterMs).
			With("retryAfterMs", limited.retryAfterMs)
	case errors.As(err, &streams):
		return errs.Newf(errs.RateLimited, "at most %d event streams may be open at once for this %s; close one",
			streams.ceiling.Max, streams.ceiling.Scope).
			With("maxStreams", streams.ceiling.Max)
	case errors.As(err, &upstream):
		return errs.Newf(errs.Unavailable, "%s is unavailable; retry shortly", upstream.peer)
	case errors.As(err, &tooLarge):
		return errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", tooLarge.limit)
	case errors.As(err, &unreadable):
		return errs.New(errs.InvalidBody, unreadable.err).WithMessage("request body could not be read")
	case errors.As(err, &mcpMethod):
		return errs.Newf(errs.MethodNotAllowed, "%s takes POST (MCP over streamable HTTP, JSON answers), not %s", mcpPath, mcpMethod.method)
	case errors.As(err, &mcpAccept):
		return web.InvalidBody(wire.Issue{Path: "", Message: fmt.Sprintf("%s answers application/json; the request's Accept (%q) does not take it", mcpPath, mcpAccept.accept)})
	case errors.As(err, &mcpRefused):
		return mcpRefusal(mcpRefused)
	case errors.As(err, &public):
		return public
	default:
		return errs.New(errs.InternalOnlyLog, err)
	}
}

// mcpRefusal is the public error for a refusal of the MCP SDK, by its status, with the SDK's
// words as the message; a 5xx is internal (its text logged, never sent).
func mcpRefusal(e *mcpRefusedError) *errs.Error {
	switch {
	case e.status == http.StatusMethodNotAllowed:
		return errs.Newf(errs.MethodNotAllowed, "%s", e.message)
	case e.status == http.StatusRequestEntityTooLarge:
		return errs.Newf(errs.PayloadTooLarge, "%s", e.message)
	case e.status == http.StatusNotFound:
		return errs.Newf(errs.NotFound, "%s", e.message)
	case e.status == http.StatusUnauthorized || e.status == http.StatusForbidden:
		return errs.Newf(errs.Unauthorized, "%s", e.message)
	case e.status >= http.StatusInternalServerError:
		return errs.New(errs.InternalOnlyLog, e)
	default:
		return web.InvalidBody(wire.Issue{Path: "", Message: e.message})
	}
}

// writeError answers err as toAppError maps it: the one way this package writes an error.
// The cause of a 5xx is logged (web.WriteError), except for an upstream that failed and a
// handler that panicked, which were logged where they happened.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := toAppError(err)
	var upstream *upstreamError
	if errors.As(err, &upstream) || errors.Is(err, errHandlerPanicked) {
		web.WriteJSON(w, e.Status(), e.Body())
		return
	}
	web.WriteError(w, r, log, e)
}
