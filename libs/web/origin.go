package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Origins is a set of trusted origins (scheme://host[:port], default ports dropped): the
// system's public URL's and the ones an operator adds (SVC_PUBLIC_URL, SVC_TRUSTED_ORIGINS).
type Origins map[string]bool

// NewOrigins normalises each origin; empty entries are skipped, and entries that are not
// absolute http(s) URLs are an error naming them.
func NewOrigins(raw ...string) (Origins, error) {
	o := Origins{}
	var bad []string
	for _, r := range raw {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		n, ok := NormalizeOrigin(r)
		if !ok {
			bad = append(bad, r)
			continue
		}
		o[n] = true
	}
	if len(bad) > 0 {
		return nil, errors.New("not an http(s) origin: " + strings.Join(bad, ", "))
	}
	return o, nil
}

// NormalizeOrigin is the origin of an absolute http(s) URL: lowercase host, default port
// dropped, no user info, path or query.
func NormalizeOrigin(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, true
}

// Trusts reports whether raw (an Origin or a Referer) is of a trusted origin.
func (o Origins) Trusts(raw string) bool {
	n, ok := NormalizeOrigin(strings.TrimSpace(raw))
	return ok && o[n]
}

// SafeMethod reports whether a method only reads (GET, HEAD, OPTIONS): a page of any site may
// make a browser send it, so it must change nothing.
func SafeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// SentByTrustedPage reports whether a browser says r comes from a page of a trusted origin:
// its Origin is trusted; or, without an Origin, its Sec-Fetch-Site is same-origin or none (a
// page of the same origin, or the user typing the address); or, with neither, its Referer is
// of a trusted origin. A browser sends Origin on every cross-origin request and every
// non-GET one, so a forged form or fetch of another site, sibling subdomains included
// (SameSite=Lax lets their cookies through), always fails it. "null" is never trusted.
func (o Origins) SentByTrustedPage(r *http.Request) bool {
	if v := strings.TrimSpace(r.Header.Get("Origin")); v != "" {
		return o.Trusts(v)
	}
	if v := strings.TrimSpace(r.Header.Get("Sec-Fetch-Site")); v != "" {
		return v == "same-origin" || v == "none"
	}
	v := strings.TrimSpace(r.Header.Get("Referer"))
	return v != "" && o.Trusts(v)
}
