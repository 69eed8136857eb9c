package apikey_test

import (
	"crypto/sha256"
	"encoding/base64"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/domain/apikey"
)

func TestNew(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k, raw, err := apikey.New(" ci ", "org_1", "usr_1", 0, now)
	require.NoError(t, err)
	require.Regexp(t, `^svc_[A-Za-z]{64}$`, raw)
	require.True(t, apikey.WellFormed(raw))
	require.Equal(t, raw[:6], k.Start())
	require.Equal(t, "ci", k.Name())
	sum := sha256.Sum256([]byte(raw))
	require.Equal(t, base64.RawURLEncoding.EncodeToString(sum[:]), k.Hash())
	require.NotContains(t, k.Hash(), raw)
	require.True(t, k.Usable(now.Add(100*365*24*time.Hour)), "no expiry")
	require.Regexp(t, `^key_`, k.ID())

	k, _, err = apikey.New("", "org_1", "", time.Hour, now)
	require.NoError(t, err)
	require.True(t, k.Usable(now.Add(time.Hour-time.Millisecond)))
	require.False(t, k.Usable(now.Add(time.Hour)))

	_, _, err = apikey.New(strings.Repeat("n", 65), "org_1", "", 0, now)
	require.ErrorIs(t, err, apikey.ErrInvalidName)
	for _, bad := range []string{"ci\xff", "a\x00b"} {
		_, _, err = apikey.New(bad, "org_1", "", 0, now)
		require.ErrorIs(t, err, apikey.ErrInvalidName, "%q", bad)
	}
	_, _, err = apikey.New("x", "org_1", "", apikey.MaxExpiresIn+time.Second, now)
	require.ErrorIs(t, err, apikey.ErrInvalidExpiry)
}

// Lifetime is the one place of the expiresIn rule: whole seconds from 1 to ten years.
func TestLifetime(t *testing.T) {
	t.Parallel()
	for _, secs := range []float64{1, 3600, apikey.MaxExpiresIn.Seconds()} {
		d, err := apikey.Lifetime(secs)
		require.NoError(t, err, secs)
		require.Equal(t, time.Duration(secs)*time.Second, d)
		_, _, err = apikey.New("x", "org_1", "", d, time.Now())
		require.NoError(t, err, "New takes what Lifetime gives")
	}
	for _, secs := range []float64{0, 0.5, -1, 1.5, apikey.MaxExpiresIn.Seconds() + 1, 1e308, math.Inf(1), math.NaN()} {
		_, err := apikey.Lifetime(secs)
		require.ErrorIs(t, err, apikey.ErrInvalidExpiry, secs)
	}
	for _, d := range []time.Duration{-time.Second, time.Millisecond, 1500 * time.Millisecond} {
		_, _, err := apikey.New("x", "org_1", "", d, time.Now())
		require.ErrorIs(t, err, apikey.ErrInvalidExpiry, d)
	}
}

func TestWellFormed(t *testing.T) {
	t.Parallel()
	good := "svc_" + strings.Repeat("a", 64)
	require.True(t, apikey.WellFormed(good))
	for _, bad := range []string{"", "svc_", "svc_notakey", good + "a", "SVC_" + strings.Repeat("a", 64),
		"svc_" + strings.Repeat("1", 64), "key_" + strings.Repeat("a", 64)} {
		require.False(t, apikey.WellFormed(bad), bad)
	}
}
