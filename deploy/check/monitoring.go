package check

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"
)

// RuleFile is a Prometheus rule file (deploy/prometheus/rules/*.yml).
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is a recording rule (Record set) or an alert (Alert set).
type Rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LoadRules reads every rule file that matches glob, strictly: a misspelt field fails.
func LoadRules(glob string) (map[string]RuleFile, error) {
	paths, err := filepath.Glob(glob)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no rule file matches %s", glob)
	}
	out := map[string]RuleFile{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f RuleFile
		if err := yaml.UnmarshalStrict(b, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out[p] = f
	}
	return out, nil
}

// Dashboard is what the checks read of a Grafana dashboard: its panels, rows' nested panels
// included, and their queries.
type Dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one panel of a dashboard.
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []Panel `json:"panels"`
}

// LoadDashboard reads a dashboard's JSON.
func LoadDashboard(path string) (Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Dashboard{}, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return Dashboard{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// AllPanels flattens the dashboard's panels (a row's own panels follow it).
func (d Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// promqlWords are the words of PromQL that are not metric names and need not be followed by
// "(": keywords, operators, and the aggregations, which may put "by (…)" before it.
var promqlWords = map[string]bool{ //nolint:gochecknoglobals // fixed vocabulary
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	"atan2": true,
	"sum":   true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// labelLists are the words that a parenthesised list of label names follows.
var labelLists = map[string]bool{ //nolint:gochecknoglobals // fixed vocabulary
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the series names a PromQL expression selects, recorded series
// (level:metric:operations) included, in order of first use. It reads the expression the way
// PromQL's lexer does as far as names go: string literals, label matchers ({…}) and ranges
// ([…]) hold none; a word followed by "(" is a function or an aggregation; the words after
// by/without/on/ignoring/group_left/group_right are label names; numbers and durations are
// not names; $variables (Grafana's) are skipped.
func MetricNames(expr string) ([]string, error) {
	rs := []rune(expr)
	var names []string
	seen := map[string]bool{}
	isWordStart := func(r rune) bool { return r == '_' || r == ':' || unicode.IsLetter(r) }
	isWord := func(r rune) bool { return isWordStart(r) || unicode.IsDigit(r) }
	skipSpace := func(i int) int {
		for i < len(rs) && unicode.IsSpace(rs[i]) {
			i++
		}
		return i
	}
	// skipTo returns the index after the closing rune, skipping string literals on the way.
	skipTo := func(i int, closing rune) (int, error) {
		for i < len(rs) {
			switch rs[i] {
			case closing:
				return i + 1, nil
			case '"', '\'', '`':
				end, err := skipString(rs, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			}
			i++
		}
		return 0, fmt.Errorf("%q: no closing %q", expr, closing)
	}
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '#': // a comment runs to the end of the line
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case r == '"' || r == '\'' || r == '`':
			end, err := skipString(rs, i)
			if err != nil {
				return nil, err
			}
			i = end
		case r == '{':
			end, err := skipTo(i+1, '}')
			if err != nil {
				return nil, err
			}
			i = end
		case r == '[':
			end, err := skipTo(i+1, ']')
			if err != nil {
				return nil, err
			}
			i = end
		case r == '$': // a Grafana variable
			i++
			for i < len(rs) && isWord(rs[i]) {
				i++
			}
		case unicode.IsDigit(r) || (r == '.' && i+1 < len(rs) && unicode.IsDigit(rs[i+1])):
			// A number (1e9, 0.99, 0x1f) or a duration (5m, 1h30m): digits, letters and dots.
			for i < len(rs) && (isWord(rs[i]) || rs[i] == '.' || ((rs[i] == '+' || rs[i] == '-') && (rs[i-1] == 'e' || rs[i-1] == 'E'))) {
				i++
			}
		case isWordStart(r):
			start := i
			for i < len(rs) && isWord(rs[i]) {
				i++
			}
			word := string(rs[start:i])
			next := skipSpace(i)
			followedByParen := next < len(rs) && rs[next] == '('
			lower := strings.ToLower(word)
			switch {
			case labelLists[lower] && followedByParen:
				end, err := skipTo(next+1, ')')
				if err != nil {
					return nil, err
				}
				i = end
			case promqlWords[lower], followedByParen:
			default:
				if !seen[word] {
					seen[word] = true
					names = append(names, word)
				}
			}
		default:
			i++
		}
	}
	return names, nil
}

func skipString(rs []rune, i int) (int, error) {
	quote := rs[i]
	for j := i + 1; j < len(rs); j++ {
		if rs[j] == '\\' && quote != '`' {
			j++
			continue
		}
		if rs[j] == quote {
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%q: unterminated string", string(rs))
}

// MarkdownAnchors returns the anchors GitHub gives the headings of a Markdown file: the
// heading's text in lower case, punctuation other than "-" and "_" dropped, spaces turned
// into "-", with "-1", "-2", … after repeats. Headings inside fenced code blocks are not
// headings.
func MarkdownAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	count := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		s := slug.String()
		if n := count[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		count[s]++
	}
	return anchors, nil
}

// ReadLines returns the non-empty lines of a file, trimmed.
func ReadLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// SortedKeys returns a set's members in order.
func SortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
