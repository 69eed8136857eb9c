package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/webhook-ingress/internal/domain/signature"
)

func TestGitHub(t *testing.T) {
	t.Parallel()
	// The example of GitHub's documentation ("Validating webhook deliveries").
	secret, body := []byte("It's a Secret to Everybody"), []byte("Hello, World!")
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	require.Equal(t, want, signature.SignGitHub(secret, body))
	require.NoError(t, signature.VerifyGitHub(secret, want, body))

	for _, tc := range []struct {
		name, header string
		body         []byte
		secret       []byte
		err          error
	}{
		{"Missing", "", body, secret, signature.ErrMissing},
		{"NoPrefix", strings.TrimPrefix(want, "sha256="), body, secret, signature.ErrMalformed},
		{"Sha1", "sha1=" + strings.TrimPrefix(want, "sha256="), body, secret, signature.ErrMalformed},
		{"Short", want[:len(want)-2], body, secret, signature.ErrMalformed},
		{"NotHex", want[:len(want)-1] + "g", body, secret, signature.ErrMalformed},
		{"UpperCaseHex", "sha256=" + strings.ToUpper(want[7:]), body, secret, nil},
		{"OtherBody", want, []byte("Hello, World?"), secret, signature.ErrMismatch},
		{"OtherSecret", want, body, []byte("another secret"), signature.ErrMismatch},
		{"FlippedDigit", want[:len(want)-1] + "6", body, secret, signature.ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := signature.VerifyGitHub(tc.secret, tc.header, tc.body)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
		})
	}
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	// The example of the Standard Webhooks specification.
	key, err := signature.ParseStandardSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	d := signature.StandardDelivery{
		ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Timestamp: "1614265330", Body: []byte(`{"test": 2432232314}`),
		Signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
	}
	at := time.Unix(1614265330, 0)
	require.Equal(t, d.Signature, signature.SignStandard(key, d.ID, d.Timestamp, d.Body))
	require.NoError(t, signature.VerifyStandard(key, d, at))

	with := func(mut func(*signature.StandardDelivery)) signature.StandardDelivery {
		c := d
		mut(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		d    signature.StandardDelivery
		now  time.Time
		err  error
	}{
		{"AtTheEdgeOfTheToleranceBefore", d, at.Add(5 * time.Minute), nil},
		{"AtTheEdgeOfTheToleranceAfter", d, at.Add(-5 * time.Minute), nil},
		{"OneOfSeveralSignatures", with(func(c *signature.StandardDelivery) {
			c.Signature = "v1a,abc v1," + base64.StdEncoding.EncodeToString(make([]byte, 32)) + " " + d.Signature
		}), at, nil},
		{"Stale", d, at.Add(5*time.Minute + time.Second), signature.ErrStale},
		{"Future", d, at.Add(-5*time.Minute - time.Second), signature.ErrStale},
		{"NoID", with(func(c *signature.StandardDelivery) { c.ID = "" }), at, signature.ErrMissing},
		{"NoTimestamp", with(func(c *signature.StandardDelivery) { c.Timestamp = "" }), at, signature.ErrMissing},
		{"NoSignature", with(func(c *signature.StandardDelivery) { c.Signature = "" }), at, signature.ErrMissing},
		{"TimestampNotANumber", with(func(c *signature.StandardDelivery) { c.Timestamp = "16142653e0" }), at, signature.ErrMalformed},
		{"TimestampNegative", with(func(c *signature.StandardDelivery) { c.Timestamp = "-1614265330" }), at, signature.ErrMalformed},
		{"OnlyOtherVersions", with(func(c *signature.StandardDelivery) { c.Signature = "v1a," + d.Signature[3:] }), at, signature.ErrMalformed},
		{"SignatureNotBase64", with(func(c *signature.StandardDelivery) { c.Signature = "v1,***" }), at, signature.ErrMalformed},
		{"OtherBody", with(func(c *signature.StandardDelivery) { c.Body = []byte(`{"test": 2432232315}`) }), at, signature.ErrMismatch},
		{"OtherID", with(func(c *signature.StandardDelivery) { c.ID = "msg_other" }), at, signature.ErrMismatch},
		{"TimestampIsSigned", with(func(c *signature.StandardDelivery) { c.Timestamp = "1614265331" }), at, signature.ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := signature.VerifyStandard(key, tc.d, tc.now)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
		})
	}

	t.Run("Secret", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!", "whsec_c2hvcnQ="} {
			_, err := signature.ParseStandardSecret(bad)
			require.Error(t, err, "%q", bad)
		}
	})
}

// FuzzGitHubSignatureHeader: any header either parses to exactly a SHA-256 MAC that prints
// back to the same header (modulo hex case), or is refused; never a panic.
func FuzzGitHubSignatureHeader(f *testing.F) {
	for _, s := range []string{
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "", "sha256=", "sha1=abc",
		"sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17", "sha256=zz", "sha256 =00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		mac, err := signature.ParseGitHubHeader(header)
		if err != nil {
			require.Nil(t, mac)
			return
		}
		require.Len(t, mac, sha256.Size)
		require.Equal(t, strings.ToLower(header), "sha256="+hex.EncodeToString(mac))
		// Verification of a body against its own signature agrees with the parse.
		body := []byte(header)
		m := hmac.New(sha256.New, mac)
		m.Write(body)
		require.NoError(t, signature.VerifyGitHub(mac, "sha256="+hex.EncodeToString(m.Sum(nil)), body))
	})
}

// FuzzStandardWebhooksSignatureHeader: any webhook-signature header yields only 32-byte v1
// signatures, each present in the header, or is refused; never a panic. Timestamps parse only
// from plain digits.
func FuzzStandardWebhooksSignatureHeader(f *testing.F) {
	for _, s := range []string{
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "", " ", "v1,", "v1a,abc v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		"v1,***", "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", strings.Repeat("v1,x ", 40),
	} {
		f.Add(s, "1614265330")
	}
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "-1")
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "99999999999999999999")
	f.Fuzz(func(t *testing.T, header, ts string) {
		sigs, err := signature.ParseStandardSignatureHeader(header)
		if err == nil {
			require.NotEmpty(t, sigs)
			for _, s := range sigs {
				require.Len(t, s, sha256.Size)
				require.Contains(t, header, "v1,"+base64.StdEncoding.EncodeToString(s))
			}
		}
		when, err := signature.ParseStandardTimestamp(ts)
		if err == nil {
			require.Equal(t, ts, strings.TrimLeft(ts, "+-"))
			n, perr := strconv.ParseInt(ts, 10, 64)
			require.NoError(t, perr)
			require.Equal(t, n, when.Unix())
		}
	})
}
