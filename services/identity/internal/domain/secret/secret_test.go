package secret_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/domain/secret"
)

func TestRandom(t *testing.T) {
	t.Parallel()
	seen := map[byte]int{}
	for range 200 {
		s := secret.Random(64, secret.LowerAlnum)
		require.Len(t, s, 64)
		require.True(t, secret.Only(s, secret.LowerAlnum))
		for i := 0; i < len(s); i++ {
			seen[s[i]]++
		}
	}
	require.Len(t, seen, len(secret.LowerAlnum), "every character shows up")
	require.NotEqual(t, secret.Random(32, secret.Letters), secret.Random(32, secret.Letters))
	require.Panics(t, func() { secret.Random(1, "") })
}

func TestOnlyAndEqual(t *testing.T) {
	t.Parallel()
	require.True(t, secret.Only("", secret.Letters))
	require.False(t, secret.Only("ab1", secret.Letters))
	require.True(t, secret.Equal([]byte("x"), []byte("x")))
	require.False(t, secret.Equal([]byte("x"), []byte("y")))
	require.Len(t, secret.SHA256URL("x"), 43)
	require.False(t, strings.ContainsAny(secret.SHA256URL("anything at all"), "+/="))
}
