package argon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/adapters/argon"
)

func TestHasher(t *testing.T) {
	t.Parallel()
	h, ctx := argon.New(argon.DefaultParams()), context.Background()
	enc, err := h.Hash(ctx, "correct horse")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(enc, "$argon2id$v=19$m=19456,t=2,p=1$"), enc)
	require.NotContains(t, enc, "correct horse")

	ok, err := h.Verify(ctx, "correct horse", enc)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = h.Verify(ctx, "correct horsE", enc)
	require.NoError(t, err)
	require.False(t, ok)

	again, err := h.Hash(ctx, "correct horse")
	require.NoError(t, err)
	require.NotEqual(t, enc, again, "every hash has its own salt")

	// A hash made with other parameters still verifies: they are read from the string.
	cheap := argon.New(argon.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 8, KeyLen: 16})
	enc2, err := cheap.Hash(ctx, "pw")
	require.NoError(t, err)
	ok, err = h.Verify(ctx, "pw", enc2)
	require.NoError(t, err)
	require.True(t, ok)

	for _, bad := range []string{"", "plain", "$argon2i$v=19$m=64,t=1,p=1$c2FsdA$aGFzaA",
		"$argon2id$v=18$m=64,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdA$aGFzaA",
		"$argon2id$v=19$m=64,t=1,p=1$!!$aGFzaA", "$argon2id$v=19$m=64,t=1,p=1$c2FsdA$"} {
		_, err := h.Verify(ctx, "pw", bad)
		require.ErrorIs(t, err, argon.ErrMalformed, bad)
	}
}
