package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/domain/credential"
)

// decode reads a JSON object body into v the way better-auth's routes do: members the route
// does not know are ignored (its client sends extras such as callbackURL), an empty body is
// an empty object, and anything that is not a JSON object, or a member of the wrong type, is
// a VALIDATION_ERROR naming the member.
func decode(r *http.Request, v any) error {
	raw, err := io.ReadAll(r.Body)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return errTooLarge
	}
	if err != nil {
		return auth.Invalid("", "the request body could not be read")
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return auth.Invalid("", "the body must be a JSON object")
	}
	// No text this service stores or looks up may hold NUL (Postgres refuses it in text).
	if bytes.Contains(raw, []byte(`\u0000`)) {
		return auth.Invalid("", "strings must not contain NUL characters")
	}
	if e := wire.CheckJSON(raw); e != nil {
		// better-auth names a member as a dotted path ("[body.a.b]"), not a JSON Pointer.
		return auth.Invalid(strings.ReplaceAll(strings.TrimPrefix(e.Pointer, "/"), "/", "."), e.Message)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var (
			syntaxErr *json.SyntaxError
			typeErr   *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
			return auth.Invalid("", "the body is not valid JSON")
		case errors.As(err, &typeErr):
			return auth.Invalid(typeErr.Field, "must be "+kind(typeErr.Type.Kind().String())+", not "+typeErr.Value)
		default:
			return auth.Invalid("", err.Error())
		}
	}
	return nil
}

func kind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return "a number"
	}
}

// required reports a missing or empty string member.
func required(field, value string) error {
	if strings.TrimSpace(value) == "" {
		return auth.Invalid(field, "is required")
	}
	return nil
}

// nullableString is a JSON member that may be absent, null or a string.
type nullableString struct {
	Set   bool
	Null  bool
	Value string
}

// UnmarshalJSON records which of the three it was.
func (n *nullableString) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &n.Value); err != nil {
		return errors.New("must be a string or null")
	}
	return nil
}

// credentials reads the request's Authorization, Cookie and x-api-key headers.
func (s *Server) credentials(r *http.Request) credential.Credentials {
	return credential.Parse(r.Header.Get("Authorization"), strings.Join(r.Header.Values("Cookie"), "; "),
		r.Header.Get("X-Api-Key"), s.signer)
}

// clientIP is the client's address, as the rate limits key it and a session records it.
// Identity listens where clients can reach it without the gateway, so a header the client
// can write (X-Forwarded-For) is never believed. Through the gateway, which is the edge and
// saw the TCP peer, the address is the one it signed into the request (internalauth,
// Identity.ClientIP, bound to this method, path and query for 30 s); otherwise it is the peer
// address itself.
func (s *Server) clientIP(r *http.Request) string {
	if id, err := s.internal.Verify(r.Header, r.Method, r.URL.Path, r.URL.RawQuery, time.Now()); err == nil {
		if ip := net.ParseIP(id.ClientIP); ip != nil {
			return ip.String()
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Origins is the set of trusted origins (libs/web's, which the gateway's check of
// cookie-authenticated writes uses too).
type Origins web.Origins

// NewOrigins normalises each origin (scheme://host[:port], default ports dropped); entries
// that are not absolute http(s) URLs are an error naming them.
func NewOrigins(raw ...string) (Origins, error) {
	o, err := web.NewOrigins(raw...)
	return Origins(o), err
}

// check applies the Origin rule to a mutating request: the Origin header (or, when it is
// absent, the Referer's origin) must be a trusted origin. It holds whatever the credentials:
// cookie, bearer token and API key alike (docs/API.md, Authentication and organizations).
func (o Origins) check(r *http.Request) error {
	v := strings.TrimSpace(r.Header.Get("Origin"))
	if v == "" {
		v = strings.TrimSpace(r.Header.Get("Referer"))
	}
	if v == "" || v == "null" {
		return &originError{missing: true}
	}
	n, ok := web.NormalizeOrigin(v)
	if !ok || !o[n] {
		return &originError{}
	}
	return nil
}

// mutating reports whether a method needs the Origin check.
func mutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}
