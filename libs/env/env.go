// Package env reads SVC_* settings from the environment once, at start-up, and collects every
// bad value so that a service refuses to start with one message naming each variable at fault.
package env

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// LookupFunc is os.LookupEnv or a stand-in for tests.
type LookupFunc func(name string) (string, bool)

// Reader reads typed settings and remembers every failure.
type Reader struct {
	lookup LookupFunc
	errs   []error
}

// New returns a Reader over lookup.
func New(lookup LookupFunc) *Reader {
	if lookup == nil {
		panic("nil lookup")
	}
	return &Reader{lookup: lookup}
}

// Err joins every failure seen so far, or returns nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

func (r *Reader) fail(name, value, why string) {
	r.errs = append(r.errs, fmt.Errorf("setting %s=%q: %s", name, value, why))
}

func (r *Reader) raw(name string) (string, bool) {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return strings.TrimSpace(v), true
}

// String returns the variable or def when unset or empty.
func (r *Reader) String(name, def string) string {
	if v, ok := r.raw(name); ok {
		return v
	}
	return def
}

// Required returns the variable and records a failure when it is unset.
func (r *Reader) Required(name string) string {
	v, ok := r.raw(name)
	if !ok {
		r.errs = append(r.errs, fmt.Errorf("setting %s is required", name))
	}
	return v
}

// Secret returns a required variable at least minLen bytes long; the value is never echoed.
func (r *Reader) Secret(name string, minLen int) string {
	v, ok := r.raw(name)
	switch {
	case !ok:
		r.errs = append(r.errs, fmt.Errorf("setting %s is required", name))
	case len(v) < minLen:
		r.errs = append(r.errs, fmt.Errorf("setting %s must be at least %d bytes", name, minLen))
	}
	return v
}

// OneOf returns the variable when it is one of allowed, or def.
func (r *Reader) OneOf(name, def string, allowed ...string) string {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, v, "want one of "+strings.Join(allowed, ", "))
	return def
}

// Int returns an integer in [lo, hi] or def.
func (r *Reader) Int(name string, def, lo, hi int) int {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		r.fail(name, v, fmt.Sprintf("want an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

// Duration returns a Go duration ("10s", "1m30s"); "0" is allowed and means zero.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	if v == "0" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, "want a duration such as 500ms, 10s or 1m")
		return def
	}
	return d
}

// Bool accepts 1/0/true/false.
func (r *Reader) Bool(name string, def bool) bool {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "want 1, 0, true or false")
		return def
	}
	return b
}

// URL returns an absolute URL whose scheme is one of schemes.
func (r *Reader) URL(name, def string, schemes ...string) string {
	v, ok := r.raw(name)
	if !ok {
		v = def
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		r.fail(name, v, "want an absolute URL")
		return v
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return v
		}
	}
	r.fail(name, v, "want a URL with scheme "+strings.Join(schemes, " or "))
	return v
}

// Addr returns a listen address of the form host:port or :port.
func (r *Reader) Addr(name, def string) string {
	v := r.String(name, def)
	i := strings.LastIndex(v, ":")
	if i < 0 {
		r.fail(name, v, "want host:port or :port")
		return v
	}
	if p, err := strconv.Atoi(v[i+1:]); err != nil || p < 0 || p > 65535 {
		r.fail(name, v, "want host:port or :port")
	}
	return v
}
