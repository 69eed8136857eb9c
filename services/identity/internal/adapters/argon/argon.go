// Package argon hashes passwords with argon2id (golang.org/x/crypto/argon2) into PHC strings:
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>
//
// The parameters travel with each hash, so they can be raised later without invalidating the
// stored ones. Gate bounds how many run at once, and so the memory they take.
package argon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters.
type Params struct {
	// Memory is in KiB.
	Memory uint32
	// Time is the number of passes.
	Time    uint32
	Threads uint8
	SaltLen uint32
	KeyLen  uint32
}

// DefaultParams are the OWASP Password Storage Cheat Sheet's first argon2id setting:
// 19 MiB of memory, 2 passes, 1 lane, a 16-byte salt and a 32-byte hash. One hash takes
// some 30 ms of one core here: slow for an attacker with a stolen table, cheap enough for a
// sign-in, and sign-in attempts are rate limited (10 a minute per IP and address) anyway.
// The 19 MiB are per hash in flight: Gate keeps the number in flight bounded.
func DefaultParams() Params {
	return Params{Memory: 19 * 1024, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}
}

// Upper bounds on what Verify accepts from a stored hash, so that a corrupted row cannot
// make one sign-in eat the machine.
const (
	maxMemory  = 1 << 20 // 1 GiB
	maxTime    = 10
	maxThreads = 16
	maxKeyLen  = 128
)

// Hasher implements port.PasswordHasher.
type Hasher struct{ p Params }

// New returns a Hasher with p.
func New(p Params) *Hasher {
	if p.Memory == 0 || p.Time == 0 || p.Threads == 0 || p.SaltLen < 8 || p.KeyLen < 16 {
		panic("argon: parameters too weak")
	}
	return &Hasher{p: p}
}

// Hash returns the PHC string of password with a fresh salt.
func (h *Hasher) Hash(_ context.Context, password string) (string, error) {
	salt := make([]byte, h.p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, h.p.Time, h.p.Memory, h.p.Threads, h.p.KeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, h.p.Memory, h.p.Time, h.p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// ErrMalformed is returned for an encoded hash Verify cannot read.
var ErrMalformed = errors.New("argon: malformed hash")

// Verify reports whether password matches encoded; the comparison is constant-time.
func (h *Hasher) Verify(_ context.Context, password, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, ErrMalformed
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, ErrMalformed
	}
	var (
		memory, passes uint32
		threads        uint8
	)
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil {
		return false, ErrMalformed
	}
	if memory == 0 || memory > maxMemory || passes == 0 || passes > maxTime || threads == 0 || threads > maxThreads {
		return false, ErrMalformed
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil || len(salt) == 0 {
		return false, ErrMalformed
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > maxKeyLen {
		return false, ErrMalformed
	}
	got := argon2.IDKey([]byte(password), salt, passes, memory, threads, uint32(len(want))) //nolint:gosec // len(want) <= maxKeyLen
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
