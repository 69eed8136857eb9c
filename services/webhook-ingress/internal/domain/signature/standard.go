package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
	// StandardTolerance is how far webhook-timestamp may be from now, either way.
	StandardTolerance = 5 * time.Minute
	// maxSignatureHeader bounds the work one webhook-signature header can cause.
	maxSignatureHeader = 4096
	maxSignatures      = 16
	secretPrefix       = "whsec_"
)

// ParseStandardSecret decodes a "whsec_<base64>" secret into the HMAC key.
func ParseStandardSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New("must start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("must be whsec_ followed by standard base64")
	}
	if len(key) < 16 {
		return nil, errors.New("key must be at least 16 bytes")
	}
	return key, nil
}

// ParseStandardSignatureHeader reads a webhook-signature header: space-separated
// "<version>,<base64>" entries. It returns the decoded v1 signatures; entries of other versions
// are skipped (a sender may sign with several schemes at once). A header with no well-formed v1
// entry is malformed.
func ParseStandardSignatureHeader(v string) ([][]byte, error) {
	if strings.TrimSpace(v) == "" {
		return nil, ErrMissing
	}
	if len(v) > maxSignatureHeader {
		return nil, ErrMalformed
	}
	var out [][]byte
	for i, entry := range strings.Fields(v) {
		if i >= maxSignatures {
			return nil, ErrMalformed
		}
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		mac, err := base64.StdEncoding.Strict().DecodeString(sig)
		if err != nil || len(mac) != sha256.Size {
			continue
		}
		out = append(out, mac)
	}
	if len(out) == 0 {
		return nil, ErrMalformed
	}
	return out, nil
}

// ParseStandardTimestamp reads webhook-timestamp: integer seconds since the Unix epoch.
func ParseStandardTimestamp(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, ErrMissing
	}
	if len(v) > 12 || strings.TrimLeft(v, "0123456789") != "" {
		return time.Time{}, ErrMalformed
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, ErrMalformed
	}
	return time.Unix(n, 0), nil
}

// StandardDelivery is the signed part of one Standard Webhooks delivery.
type StandardDelivery struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// VerifyStandard checks d against key at now: the timestamp within StandardTolerance, and one
// v1 signature equal to base64(HMAC-SHA256(key, id "." timestamp "." body)).
func VerifyStandard(key []byte, d StandardDelivery, now time.Time) error {
	if d.ID == "" || d.Timestamp == "" || d.Signature == "" {
		return ErrMissing
	}
	ts, err := ParseStandardTimestamp(d.Timestamp)
	if err != nil {
		return err
	}
	sigs, err := ParseStandardSignatureHeader(d.Signature)
	if err != nil {
		return err
	}
	if skew := now.Sub(ts); skew > StandardTolerance || skew < -StandardTolerance {
		return ErrStale
	}
	want := standardMAC(key, d.ID, d.Timestamp, d.Body)
	match := false
	for _, s := range sigs {
		// Every candidate is compared, so the time taken says nothing about which one matched.
		if hmac.Equal(s, want) {
			match = true
		}
	}
	if !match {
		return ErrMismatch
	}
	return nil
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignStandard returns the webhook-signature value for a delivery, as a sender computes it.
func SignStandard(key []byte, id, ts string, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(key, id, ts, body))
}
