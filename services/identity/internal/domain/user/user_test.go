package user_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/domain/user"
)

func TestCheckPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pw   string
		want error
	}{
		{"Empty", "", user.ErrPasswordTooShort},
		{"Seven", "1234567", user.ErrPasswordTooShort},
		{"Eight", "12345678", nil},
		{"EightRunes", "ééééééé€", nil},
		{"Max", strings.Repeat("x", 128), nil},
		{"OverMax", strings.Repeat("x", 129), user.ErrPasswordTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorIs(t, user.CheckPassword(tc.pw), tc.want)
		})
	}
}

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{" Ann@Example.COM ", "ann@example.com", true},
		{"a.b+c@x.io", "a.b+c@x.io", true},
		{"", "", false},
		{"no-at", "", false},
		{"@x.io", "", false},
		{"a@", "", false},
		{"Ann <ann@x.io>", "", false},
		{"a b@x.io", "", false},
		{strings.Repeat("a", 250) + "@x.io", "", false},
		{"ann\xff@x.io", "", false},
		{"ann@x\xff.io", "", false},
	} {
		got, err := user.NormalizeEmail(tc.in)
		if !tc.ok {
			require.ErrorIs(t, err, user.ErrInvalidEmail, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
	}
}

func TestUser(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	u, err := user.New("Ann@X.io", " Ann ", "hash", now)
	require.NoError(t, err)
	require.Equal(t, "ann@x.io", u.Email())
	require.Equal(t, "Ann", u.Name())
	require.Regexp(t, `^usr_`, u.ID())
	require.Equal(t, now.Truncate(time.Millisecond), u.CreatedAt())
	require.False(t, u.RevokesSessions())
	require.False(t, u.PasswordChanged())

	u.ChangePassword("hash2", false, now.Add(time.Hour))
	require.Equal(t, "hash2", u.PasswordHash())
	require.False(t, u.RevokesSessions())
	require.True(t, u.PasswordChanged(), "saving it voids the user's reset links")
	u.ChangePassword("hash3", true, now.Add(time.Hour))
	require.True(t, u.RevokesSessions())

	_, err = user.New("Ann@X.io", strings.Repeat("n", 101), "hash", now)
	require.ErrorIs(t, err, user.ErrInvalidName)
	for _, bad := range []string{"Ann\xff", "a\x00b"} {
		_, err = user.New("Ann@X.io", bad, "hash", now)
		require.ErrorIs(t, err, user.ErrInvalidName, "%q", bad)
	}
	u, err = user.New("Ann@X.io", strings.Repeat("é", 100), "hash", now)
	require.NoError(t, err, "100 characters, 200 bytes")
	require.Len(t, []rune(u.Name()), 100)
}
