// Package signature verifies the signatures of the shipped webhook routes: GitHub's
// X-Hub-Signature-256 and Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature).
// Every comparison is constant-time; every parser of a header bounds the work it does.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// ErrMissing, ErrMalformed, ErrMismatch and ErrStale are the reasons a signature fails.
var (
	ErrMissing   = errors.New("signature header is missing")
	ErrMalformed = errors.New("signature header is malformed")
	ErrMismatch  = errors.New("signature does not match the payload")
	ErrStale     = errors.New("timestamp is outside the tolerance")
)

// GitHubHeader is the header GitHub signs deliveries with.
const GitHubHeader = "X-Hub-Signature-256"

// ParseGitHubHeader reads "sha256=<64 hex digits>" and returns the 32-byte MAC.
func ParseGitHubHeader(v string) ([]byte, error) {
	if v == "" {
		return nil, ErrMissing
	}
	hexMAC, ok := strings.CutPrefix(v, "sha256=")
	if !ok || len(hexMAC) != 2*sha256.Size {
		return nil, ErrMalformed
	}
	mac, err := hex.DecodeString(hexMAC)
	if err != nil {
		return nil, ErrMalformed
	}
	return mac, nil
}

// VerifyGitHub checks header against HMAC-SHA256(secret, body).
func VerifyGitHub(secret []byte, header string, body []byte) error {
	got, err := ParseGitHubHeader(header)
	if err != nil {
		return err
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrMismatch
	}
	return nil
}

// SignGitHub returns the X-Hub-Signature-256 value for body, as GitHub computes it.
func SignGitHub(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
