package wire_test

import (
	"encoding/binary"
	"math/big"
	"sort"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

// parseID returns the ULID of a wire id.
func parseID(t *testing.T, id string) ulid.ULID {
	t.Helper()
	_, rest, ok := strings.Cut(id, "_")
	require.True(t, ok, id)
	u, err := ulid.ParseStrict(strings.ToUpper(rest))
	require.NoError(t, err)
	return u
}

// TestIDNeighboursAreNotGuessable makes ids as fast as it can and checks every pair made in
// the same millisecond: they still sort in creation order, yet the later one is not the earlier
// one plus a small step. ulid.Make added less than 2^32 (finding 7 of issue 21), so whoever held
// one id could walk to the ids made next to it.
func TestIDNeighboursAreNotGuessable(t *testing.T) {
	t.Parallel()

	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = wire.NewID(wire.Invitation)
	}
	require.True(t, sort.StringsAreSorted(ids), "ids made in order sort in order")

	step := new(big.Int).Lsh(big.NewInt(1), 32)
	pairs := 0
	for i := 1; i < len(ids); i++ {
		a, b := parseID(t, ids[i-1]), parseID(t, ids[i])
		if a.Time() != b.Time() {
			continue
		}
		pairs++
		diff := new(big.Int).Sub(new(big.Int).SetBytes(b[:]), new(big.Int).SetBytes(a[:]))
		require.Positive(t, diff.Sign(), "%s then %s", ids[i-1], ids[i])
		require.Positive(t, diff.Cmp(step), "%s then %s differ by only %s", ids[i-1], ids[i], diff)
	}
	require.Positive(t, pairs, "some ids were made in the same millisecond")
}

// TestIDEntropyIsCryptoRand pins crypto/rand to a seed and makes an id twice: the same random
// bits come out, so they come from crypto/rand and not from a generator seeded with the start
// time. It cannot run in parallel: cryptotest.SetGlobalRandom changes crypto/rand for the whole
// process, and refuses parallel tests.
//
//nolint:paralleltest // cryptotest.SetGlobalRandom forbids t.Parallel
func TestIDEntropyIsCryptoRand(t *testing.T) {
	random := func(seed uint64) uint64 {
		cryptotest.SetGlobalRandom(t, seed)
		u := parseID(t, wire.NewID(wire.Invitation))
		return binary.BigEndian.Uint64(u[8:])
	}
	first := random(1)
	require.Equal(t, first, random(1), "the same crypto/rand stream gives the same id bits")
	require.NotEqual(t, first, random(2))
}
