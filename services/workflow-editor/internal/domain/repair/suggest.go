// Package repair makes the guesses behind the did_you_mean hints: the closest of a list of
// names within a budget of work, the slips from other languages fixed in an expression's
// text, and values written for people (durations, numbers, headers) read as the value meant.
// It knows nothing of workflows or of the catalog: its callers judge where a guess applies.
package repair

import (
	"strings"
	"unicode"
)

// MaxCompared is how many runes of a string the edit distance looks at: block ids have at most
// 64, and a longer input is not a typo of one.
const MaxCompared = 64

// SuggestBudget bounds the work (dynamic-programming cells of the edit distance, 2 to 4 ns
// each) one batch of operations, or one validation, may spend on did_you_mean guesses: at
// most about 30 ms on a shared core, enough to guess each of 500 missing ids among 1,000
// blocks when the ids differ by a few characters.
// Each guess is a nicety, so past the budget no more are made; the batch itself never waits
// on them. Apply runs under the workflow's row lock,
// where every millisecond is one that a concurrent patch of the same workflow waits.
const SuggestBudget = 8_000_000

// What looking at a candidate is charged, in cells, besides the edit distance: the
// comparisons of the normalized strings, and one bag-distance pass over the buckets.
const (
	candidateCost = 2
	bagCost       = 5
)

// maxNormalized is how much of an input is normalized: enough to hold any id many times over,
// and a bound on what comparing a huge input (a 1 MB block_id) with each candidate costs.
const maxNormalized = 4 * MaxCompared

// bagBuckets is how many character classes the bag distance counts: a-z and 0-9 each have
// one, any other rune shares one of the rest. Sharing only lowers the bound, never breaks it.
const bagBuckets = 40

// Closest returns the candidate a model most likely meant by got, or "" when none is close
// enough to be a useful guess. Case, punctuation and separators are ignored first ("httpRequest"
// is "http.request"), then a containment ("http" in "http.request") or a small edit distance
// decides. It is for the short, fixed lists of the catalog (types, params, operations,
// functions); guesses among a workflow's block ids go through a suggester with a budget.
func Closest(got string, candidates []string) string {
	s := Suggester{budget: -1}
	return s.Closest(got, candidates)
}

// Suggester makes did_you_mean guesses within a budget of edit-distance work and remembers
// the normalized form of each candidate it has seen.
type Suggester struct {
	// budget is the number of cells still allowed; negative means no bound.
	budget int
	// cells counts the cells computed (Cells).
	cells   int
	norms   map[string]Normalized
	rows    [2][MaxCompared + 1]int
	byBound [][]bounded
}

// Normalized is a candidate as a Suggester compares it; NormalizeFor makes one.
type Normalized struct {
	s   string
	r   []rune
	bag [bagBuckets]uint8 // how many runes of r fall in each bucket
}

// NewSuggester returns a suggester with SuggestBudget to spend.
func NewSuggester() *Suggester {
	return &Suggester{budget: SuggestBudget, norms: map[string]Normalized{}}
}

func (s *Suggester) normalized(c string) Normalized {
	if n, ok := s.norms[c]; ok {
		return n
	}
	n := NormalizeFor(c)
	if s.norms != nil {
		s.norms[c] = n
	}
	return n
}

// NormalizeFor is c as a Suggester compares it.
func NormalizeFor(c string) Normalized {
	if len(c) > 4*maxNormalized {
		c = c[:4*maxNormalized]
	}
	str := Normalize(c)
	if len(str) > maxNormalized {
		str = str[:maxNormalized]
	}
	r := []rune(str)
	if len(r) > MaxCompared {
		r = r[:MaxCompared]
	}
	n := Normalized{s: str, r: r}
	for _, x := range r {
		n.bag[bucket(x)]++
	}
	return n
}

func bucket(r rune) int {
	switch {
	case r >= 'a' && r <= 'z':
		return int(r - 'a')
	case r >= '0' && r <= '9':
		return 26 + int(r-'0')
	}
	return 36 + int(r)%(bagBuckets-36)
}

// bagDistance is a lower bound of the edit distance between a and b: the larger of what a
// has that b lacks and what b has that a lacks, counted by character class. An edit removes
// at most one from each side, so no fewer edits can turn one into the other. Ids of a
// workflow differ in their characters, so it rules out nearly every candidate at the cost of
// one pass over the buckets, where the edit distance would cost up to 64 rows.
func bagDistance(a, b *[bagBuckets]uint8) int {
	more, less := 0, 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d > 0 {
			more += d
		} else {
			less -= d
		}
	}
	return max(more, less)
}

// ClosestValue is Closest for the values of an enum: only a difference of case or
// punctuation ("get" for "GET"), a containment, or one edit in four characters is a guess
// worth making, since a value a model made up ("FETCH") is not a typo of a similar one.
func ClosestValue(got string, allowed []string) string {
	s := Suggester{budget: -1}
	return s.closestWithin(got, allowed, len([]rune(Normalize(got)))/4)
}

// Closest is the package's Closest, within the suggester's budget.
func (s *Suggester) Closest(got string, candidates []string) string {
	return s.closestWithin(got, candidates, -1)
}

// closestWithin is Closest with at most limit edits; a negative limit is the default, a third
// of got's length (at least 2).
func (s *Suggester) closestWithin(got string, candidates []string, limit int) string {
	return s.Pick(got, len(candidates), func(i int) (string, Normalized) {
		return candidates[i], s.normalized(candidates[i])
	}, limit)
}

// Pick is the guess among n candidates, the i-th of which candidate returns with its
// normalized form. It looks at the candidates best first: a cheap lower bound of each one's
// score (the bag distance) first, then the exact score in order of that bound, until the
// bound passes the best score found; so among a thousand ids the edit distance is computed
// for the few that could be the guess, not for all. The result is the candidate with the
// lowest score, the first in sort order among equals, exactly as if all were scored. Every
// candidate looked at is charged to the budget; a spent budget makes no more guesses.
func (s *Suggester) Pick(got string, n int, candidate func(i int) (string, Normalized), limit int) string {
	if got == "" || n == 0 || s.budget == 0 {
		return ""
	}
	g := NormalizeFor(got)
	if limit < 0 {
		limit = max(2, len(g.r)/3)
	}
	limit = max(limit, 1) // containment scores 1
	// The candidates that may score within the limit, by lower bound; an exact score (equal,
	// containment) is its own bound.
	if cap(s.byBound) < limit+1 {
		s.byBound = make([][]bounded, limit+1)
	}
	byBound := s.byBound[:limit+1]
	for b := range byBound {
		byBound[b] = byBound[b][:0]
	}
	for i := 0; i < n && s.budget != 0; i++ {
		_, cn := candidate(i)
		s.spend(candidateCost)
		switch {
		case g.s == cn.s:
			byBound[0] = append(byBound[0], bounded{i: i, exact: true})
		case g.s != "" && cn.s != "" && (strings.Contains(cn.s, g.s) || strings.Contains(g.s, cn.s)):
			byBound[1] = append(byBound[1], bounded{i: i, exact: true})
		case abs(len(g.r)-len(cn.r)) > limit:
			// The edit distance is at least the difference of the lengths.
		default:
			s.spend(bagCost)
			if lb := max(bagDistance(&g.bag, &cn.bag), abs(len(g.r)-len(cn.r))); lb <= limit {
				byBound[lb] = append(byBound[lb], bounded{i: i})
			}
		}
	}
	best, bestScore := "", limit+1
	for lb := 0; lb <= min(limit, bestScore); lb++ {
		for _, b := range byBound[lb] {
			c, cn := candidate(b.i)
			score := lb
			if !b.exact {
				if s.budget == 0 {
					break
				}
				score = s.levenshtein(g.r, cn.r, min(bestScore, limit))
			}
			if score < bestScore || (score == bestScore && score <= limit && c < best) {
				best, bestScore = c, score
			}
		}
	}
	if bestScore > limit {
		return ""
	}
	return best
}

// bounded is a candidate and a lower bound of its score, exact when it is the score.
type bounded struct {
	i     int
	exact bool
}

// levenshtein is the edit distance between a and b (at most maxCompared runes each) when it
// is at most k, else k+1. Only the diagonal band |i-j| <= k is computed, and it stops as soon
// as a whole row is over k: a far candidate costs a few rows, not len(a)*len(b) cells.
func (s *Suggester) levenshtein(a, b []rune, k int) int {
	n, m := len(a), len(b)
	over := k + 1
	prev, cur := s.rows[0][:m+1], s.rows[1][:m+1]
	for j := range prev {
		prev[j] = min(j, over)
	}
	for i := 1; i <= n; i++ {
		lo, hi := max(1, i-k), min(m, i+k)
		if lo == 1 {
			cur[0] = min(i, over)
		} else {
			cur[lo-1] = over
		}
		rowMin := cur[lo-1]
		for j := lo; j <= hi; j++ {
			v := prev[j-1]
			if a[i-1] != b[j-1] {
				v++
			}
			v = min(v, prev[j]+1, cur[j-1]+1, over)
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if hi < m {
			cur[hi+1] = over
		}
		s.spend(hi - lo + 1)
		if rowMin > k {
			return over
		}
		prev, cur = cur, prev
	}
	return min(prev[m], over)
}

// Cells is how many cells the suggester has computed, which tests hold to a bound that does
// not depend on the machine's speed.
func (s *Suggester) Cells() int { return s.cells }

func (s *Suggester) spend(cells int) {
	s.cells += cells
	if s.budget > 0 {
		s.budget = max(0, s.budget-cells)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Normalize is s in lower case without what is not a letter or a digit: "http.Request"
// and "httpRequest" are both "httprequest".
func Normalize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
