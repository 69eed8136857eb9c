//go:build !unix

package credential

// lock is a no-op where flock is not available; writes stay atomic, but two concurrent
// logins may lose one another's entry.
func lock(string) (func(), error) { return func() {}, nil }
