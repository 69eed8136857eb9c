package catalog

import (
	"sort"
	"strings"
)

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
