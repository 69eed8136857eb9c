package session_test

import (
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/domain/session"
)

func TestToken(t *testing.T) {
	t.Parallel()
	tok := session.NewToken()
	require.Regexp(t, `^[A-Za-z0-9]{32}$`, string(tok))
	require.NotEqual(t, tok, session.NewToken())
	got, ok := session.ParseToken(string(tok))
	require.True(t, ok)
	require.Equal(t, tok, got)
	require.Len(t, tok.Hash(), 32)
	for _, bad := range []string{"", "short", strings.Repeat("a", 31), strings.Repeat("a", 33), strings.Repeat("-", 32)} {
		_, ok := session.ParseToken(bad)
		require.False(t, ok, bad)
	}
}

func TestSigner(t *testing.T) {
	t.Parallel()
	_, err := session.NewSigner([]byte("short"))
	require.Error(t, err)

	s, err := session.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	other, err := session.NewSigner([]byte(strings.Repeat("o", 32)))
	require.NoError(t, err)

	tok := session.NewToken()
	signed := s.Sign(tok)
	require.True(t, strings.HasPrefix(signed, string(tok)+"."))

	for name, v := range map[string]string{"Plain": signed, "URLEncoded": url.QueryEscape(signed)} {
		got, ok := s.Verify(v)
		require.True(t, ok, name)
		require.Equal(t, tok, got, name)
	}
	for name, v := range map[string]string{
		"OtherKey":  other.Sign(tok),
		"Unsigned":  string(tok),
		"NoSig":     string(tok) + ".",
		"Tampered":  string(session.NewToken()) + signed[32:],
		"BadBase64": string(tok) + ".!!!",
		"BadEscape": string(tok) + ".%zz",
	} {
		_, ok := s.Verify(v)
		require.False(t, ok, name)
	}
}

func TestSlidingExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, tok := session.New("usr_1", "org_1", "1.2.3.4", "ua", now)
	require.Equal(t, s.TokenHash(), tok.Hash())
	require.Equal(t, now.Add(session.Lifetime), s.ExpiresAt())

	require.False(t, s.NeedsRefresh(now.Add(session.RefreshAge)), "a use within a day of the last refresh writes nothing")
	later := now.Add(session.RefreshAge + time.Second)
	require.True(t, s.NeedsRefresh(later))
	s.Refresh(later)
	require.Equal(t, later.Add(session.Lifetime), s.ExpiresAt())
	require.False(t, s.NeedsRefresh(later.Add(time.Hour)))

	require.False(t, s.Expired(later.Add(session.Lifetime-time.Millisecond)))
	require.True(t, s.Expired(later.Add(session.Lifetime)))
}

func TestActiveOrganization(t *testing.T) {
	t.Parallel()
	now := time.Now()
	s, _ := session.New("usr_1", "", "", "", now)
	require.Empty(t, s.ActiveOrganizationID())
	require.False(t, s.ActiveCleared())
	s.SetActiveOrganization("org_1", now)
	require.Equal(t, "org_1", s.ActiveOrganizationID())
	s.ClearActiveOrganization(now)
	require.Empty(t, s.ActiveOrganizationID())
	require.True(t, s.ActiveCleared())
	s.SetActiveOrganization("org_2", now)
	require.False(t, s.ActiveCleared())
}

// The client chooses its User-Agent (and, without the gateway, nothing else): what is stored
// is valid UTF-8 without NUL, cut on a character boundary, so the database never refuses it.
func TestClientStringsAreCleaned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ua, want string }{
		{"Mozilla\xff", "Mozilla\uFFFD"},
		{"a\x80\x80b", "a\uFFFDb"},
		{"nul\x00byte", "nulbyte"},
		{strings.Repeat("a", 511) + "é", strings.Repeat("a", 511)},
		{strings.Repeat("é", 300), strings.Repeat("é", 256)},
		{"Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (X11; Linux x86_64)"},
	} {
		s, _ := session.New("usr_1", "", "203.0.113.9\xff", tc.ua, time.Now())
		require.Equal(t, tc.want, s.UserAgent(), "%q", tc.ua)
		require.True(t, utf8.ValidString(s.UserAgent()))
		require.LessOrEqual(t, len(s.UserAgent()), 512)
		require.Equal(t, "203.0.113.9\uFFFD", s.IPAddress())
	}
}
