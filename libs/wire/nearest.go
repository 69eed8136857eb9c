package wire

import "strings"

// SameName reports whether a and b are one name written two ways: equal but for case and the
// separators '_', '-', '.' and ' ' (idempotency_key and idempotencyKey).
func SameName(a, b string) bool { return normName(a) == normName(b) }

func normName(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(s))
}

// Nearest is the candidate that name most likely means, or "" when none is a safe guess: the
// one the same name written another way (SameName), else the one within two edits (a swap of
// neighbours counts one) when no other is as near and the edits are under half name's length.
func Nearest(name string, candidates []string) string {
	for _, c := range candidates {
		if SameName(c, name) {
			return c
		}
	}
	best, bestDist, ties := "", 3, 0
	for _, c := range candidates {
		d := Distance(normName(c), normName(name))
		switch {
		case d < bestDist:
			best, bestDist, ties = c, d, 0
		case d == bestDist && c != best:
			ties++
		}
	}
	if best == "" || ties > 0 || 2*bestDist >= len(normName(name)) {
		return ""
	}
	return best
}

// Distance is the optimal string alignment distance between a and b (bytes): insertions,
// deletions, substitutions and swaps of two neighbours each count one.
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
