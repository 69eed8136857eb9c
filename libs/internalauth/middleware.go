package internalauth

import (
	"context"
	"net/http"
	"time"

	"svc.dev/proto/errs"
)

// Require lets a request through only with a valid signed identity, which handlers then read
// with FromContext. Anything else is 401 unauthorized, before any routing.
func (s Signer) Require(now func() time.Time) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := s.Verify(r.Header, r.Method, r.URL.Path, r.URL.RawQuery, now())
			if err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"` + string(errs.Unauthorized) + `"}` + "\n"))
				return
			}
			next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
		})
	}
}

// Transport signs outgoing requests, their method, path and query. A request made while
// serving a client carries that client's identity (set with WithIdentity), so the peer scopes
// its answer to the same organization; a request without one is signed as the calling
// Service, or sent unsigned when Service is empty (the gateway forwarding an open route such
// as /api/webhooks/*).
type Transport struct {
	Signer  Signer
	Service string
	Base    http.RoundTripper
	Now     func() time.Time
}

// RoundTrip signs a copy of req and sends it.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	Strip(out.Header)
	id, ok := FromContext(req.Context())
	switch {
	case ok:
		if t.Service != "" {
			id.Service = t.Service
		}
	case t.Service != "":
		id = Identity{AuthMode: ModeService, Service: t.Service}
	default:
		return t.Base.RoundTrip(out)
	}
	t.Signer.Sign(out.Header, out.Method, out.URL.Path, out.URL.RawQuery, id, t.Now())
	return t.Base.RoundTrip(out)
}

// Organization is the organization of the request's verified identity, or 401 unauthorized
// when it carries none: what every guarded handler scopes its reads and writes by.
func Organization(ctx context.Context) (string, error) {
	id, ok := FromContext(ctx)
	if !ok || id.OrganizationID == "" {
		return "", errs.Newf(errs.Unauthorized, "no organization in the request's identity")
	}
	return id.OrganizationID, nil
}
