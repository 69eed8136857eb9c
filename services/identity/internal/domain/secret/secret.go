// Package secret makes the random strings identity hands out (session tokens, API keys,
// reset tokens, slug suffixes) and hashes them for storage. Every value comes from
// crypto/rand without modulo bias, so each character carries its full share of entropy.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// The alphabets random strings are drawn from.
const (
	Alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	Letters      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	LowerAlnum   = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// Random returns n characters drawn uniformly from alphabet (at most 256 characters).
func Random(n int, alphabet string) string {
	if len(alphabet) == 0 || len(alphabet) > 256 {
		panic("secret: alphabet must hold 1 to 256 characters")
	}
	// Bytes at or above limit are rejected so that every character is equally likely.
	limit := 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/2+8)
	for len(out) < n {
		_, _ = rand.Read(buf) // crypto/rand never fails on supported platforms
		for _, b := range buf {
			if int(b) < limit {
				out = append(out, alphabet[int(b)%len(alphabet)])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out)
}

// Only reports whether s consists of characters of alphabet only.
func Only(s, alphabet string) bool {
	for i := 0; i < len(s); i++ {
		found := false
		for j := 0; j < len(alphabet); j++ {
			if s[i] == alphabet[j] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// SHA256 is the digest of s.
func SHA256(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// SHA256URL is the digest of s in unpadded base64url, the form API keys and reset tokens are
// stored in (better-auth's defaultKeyHasher).
func SHA256URL(s string) string {
	return base64.RawURLEncoding.EncodeToString(SHA256(s))
}

// Equal compares two secrets in time that does not depend on where they differ.
func Equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
