package workflow

import (
	"sort"
	"strings"
	"unicode"
)

// closest returns the candidate a model most likely meant by got, or "" when none is close
// enough to be a useful guess. Case, punctuation and separators are ignored first ("httpRequest"
// is "http.request"), then a containment ("http" in "http.request") or a small edit distance
// decides.
func closest(got string, candidates []string) string {
	if got == "" || len(candidates) == 0 {
		return ""
	}
	norm := normalize(got)
	best, bestScore := "", 1<<30
	for _, c := range candidates {
		score := similarity(norm, normalize(c))
		if score < bestScore || (score == bestScore && c < best) {
			best, bestScore = c, score
		}
	}
	limit := max(2, len([]rune(norm))/3)
	if bestScore > limit {
		return ""
	}
	return best
}

// similarity scores how far a is from b: 0 for equal, small for containment, else the edit
// distance.
func similarity(a, b string) int {
	switch {
	case a == b:
		return 0
	case a != "" && b != "" && (strings.Contains(b, a) || strings.Contains(a, b)):
		return 1
	default:
		return levenshtein(a, b)
	}
}

func normalize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// levenshtein is the edit distance between a and b, capped at 64 runes each so that a huge
// input never costs more than a few thousand steps.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 {
		ra = ra[:64]
	}
	if len(rb) > 64 {
		rb = rb[:64]
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
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

// listOf renders names for a reason text: `"a", "b", "c"`, at most limit of them.
func listOf(names []string, limit int) string {
	var b strings.Builder
	for i, n := range names {
		if i == limit {
			b.WriteString(", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`"` + n + `"`)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
