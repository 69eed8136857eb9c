package repair

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// referenceClosest is closest as it was before the band and the budget: every candidate's
// full edit distance. The suggester must guess exactly as it did.
func referenceClosest(got string, candidates []string) string {
	full := func(a, b string) int {
		ra, rb := []rune(a), []rune(b)
		ra, rb = ra[:min(len(ra), MaxCompared)], rb[:min(len(rb), MaxCompared)]
		prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1)
		for j := range prev {
			prev[j] = j
		}
		for i := 1; i <= len(ra); i++ {
			cur[0] = i
			for j := 1; j <= len(rb); j++ {
				cost := 1
				if ra[i-1] == rb[j-1] {
					cost = 0
				}
				cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			}
			prev, cur = cur, prev
		}
		return prev[len(rb)]
	}
	if got == "" || len(candidates) == 0 {
		return ""
	}
	norm := Normalize(got)
	best, bestScore := "", 1<<30
	for _, c := range candidates {
		nc := Normalize(c)
		score := full(norm, nc)
		switch {
		case norm == nc:
			score = 0
		case norm != "" && nc != "" && (strings.Contains(nc, norm) || strings.Contains(norm, nc)):
			score = 1
		}
		if score < bestScore || (score == bestScore && c < best) {
			best, bestScore = c, score
		}
	}
	if bestScore > max(2, len([]rune(norm))/3) {
		return ""
	}
	return best
}

// The banded, early-stopping distance guesses what the full one did, for ids up to 64
// characters over small alphabets (where near misses are common) and large ones.
func TestSuggesterGuessesAsBefore(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(7, 7))
	word := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	for round := range 4000 {
		alphabet := []string{"ab", "abc_", "abcdefghij", "abcdefghijklmnopqrstuvwxyz0123456789"}[round%4]
		n := 1 + rnd.IntN(64)
		candidates := make([]string, 1+rnd.IntN(30))
		for i := range candidates {
			candidates[i] = word(alphabet, max(1, n+rnd.IntN(9)-4))
		}
		got := word(alphabet, n)
		if round%5 == 4 { // generated ids: a shared prefix and a long run of zeros
			prefix, width := word("abcdefghijklmnopqrstuvwxyz_-", 1+rnd.IntN(8)), 1+rnd.IntN(60)
			candidates = make([]string, 1+rnd.IntN(300))
			for i := range candidates {
				candidates[i] = fmt.Sprintf("%s%0*d", prefix, width, rnd.IntN(1000))
			}
			got = fmt.Sprintf("%s%0*d", word("abcdefghijklmnopqrstuvwxyz", len(prefix)), width, rnd.IntN(1000))
		}
		if round%3 == 0 { // a near miss of a candidate
			c := []byte(candidates[0])
			c[rnd.IntN(len(c))] = alphabet[rnd.IntN(len(alphabet))]
			got = string(c)
		}
		s := NewSuggester()
		require.Equal(t, referenceClosest(got, candidates), s.Closest(got, candidates), "%q in %q", got, candidates)
	}
}
