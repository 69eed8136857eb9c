package expression

import (
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// The builtins of expr-lang v1.17 that allocate in proportion to an argument, each with the
// most it can allocate for its arguments, charged to the budget before the builtin runs
// (expr-lang's own memory budget is counted after an allocation, per evaluation, and not at
// all for most of these). The others allocate nothing or a constant: len, type, abs, ceil,
// floor, round, int, float, trim, trimPrefix, trimSuffix (substrings), indexOf, lastIndexOf,
// hasPrefix, hasSuffix, max, min, mean, now, duration, date, timezone, first, last, get,
// bitnot and the bit operators. The predicates (all, none, any, one, filter, map, find,
// findIndex, findLast, findLastIndex, count, sum, groupBy, sortBy, reduce) count a step per
// element instead; what map, filter, groupBy and sortBy collect is one slot per step.
//
// Sizes: a slot of an array or map is counted 16 bytes (an interface), an entry of a map 64.
const (
	slot     = 16
	mapEntry = 64
	// jsonFactor covers JSON's worst escape of a byte (\u00XX), fmtFactor a string printed as
	// it is.
	jsonFactor = 6
	fmtFactor  = 1
	// fromJSONFactor is what decoding one byte of JSON may take at most: `[0,0,...]` is an
	// interface and a float per two bytes, `{"":0}` a map per six.
	fromJSONFactor = 32
)

// costs maps a builtin's name to the bytes it may allocate for args (left: the budget's
// bytes left, to stop measuring a value beyond it). A cost that cannot be worked out (an
// argument of the wrong type) is 0: the builtin itself then refuses the arguments.
var costs = map[string]func(args []any, left int64) int64{ //nolint:gochecknoglobals // a fixed table, read only
	"string": func(a []any, left int64) int64 { return arg0Size(a, fmtFactor, left) + 32 },
	"upper":  func(a []any, _ int64) int64 { return 3 * strLen(a, 0) }, // a byte may become 3 (an invalid one becomes U+FFFD)
	"lower":  func(a []any, _ int64) int64 { return 3 * strLen(a, 0) },
	"split": func(a []any, _ int64) int64 {
		return slot * (parts(a) + 1)
	},
	"splitAfter": func(a []any, _ int64) int64 { return slot * (parts(a) + 1) },
	"replace": func(a []any, _ int64) int64 {
		if len(a) < 3 {
			return 0
		}
		s, old, repl := str(a[0]), str(a[1]), str(a[2])
		n := int64(count(s, old))
		if len(a) > 3 {
			if lim := int64(runtime.ToInt(a[3])); lim >= 0 && lim < n {
				n = lim
			}
		}
		return int64(len(s)) + n*int64(max(len(repl)-len(old), 0))
	},
	"repeat": func(a []any, _ int64) int64 {
		if len(a) < 2 {
			return 0
		}
		n := int64(runtime.ToInt(a[1]))
		l := int64(len(str(a[0])))
		if n <= 0 || l == 0 {
			return 0
		}
		if l > math.MaxInt64/n {
			return -1 // over any budget
		}
		return l * n
	},
	"join": func(a []any, _ int64) int64 {
		if len(a) == 0 {
			return 0
		}
		glue := int64(0)
		if len(a) > 1 {
			glue = int64(len(str(a[1])))
		}
		var total int64
		switch xs := a[0].(type) {
		case []string:
			for _, s := range xs {
				total += int64(len(s)) + glue
			}
		case []any:
			for _, e := range xs {
				total += int64(len(str(e))) + glue
			}
		}
		return total
	},
	"median": func(a []any, _ int64) int64 { return slot * elems(a) },
	"toJSON": func(a []any, left int64) int64 { return arg0Size(a, jsonFactor, left) },
	"fromJSON": func(a []any, _ int64) int64 {
		return fromJSONFactor*strLen(a, 0) + 64
	},
	"toBase64":   func(a []any, _ int64) int64 { return 2 * (strLen(a, 0) + 4) }, // the string and its []byte
	"fromBase64": func(a []any, _ int64) int64 { return 2 * strLen(a, 0) },
	"take": func(a []any, _ int64) int64 {
		if len(a) < 2 {
			return 0
		}
		return slot * min(elems(a), max(int64(runtime.ToInt(a[1])), 0))
	},
	"keys":      func(a []any, _ int64) int64 { return slot * elems(a) },
	"values":    func(a []any, _ int64) int64 { return slot * elems(a) },
	"toPairs":   func(a []any, _ int64) int64 { return (slot + 2*slot + 24) * elems(a) },
	"fromPairs": func(a []any, _ int64) int64 { return mapEntry * elems(a) },
	"reverse":   func(a []any, _ int64) int64 { return slot * elems(a) },
	"uniq":      func(a []any, _ int64) int64 { return (slot + mapEntry) * elems(a) },
	"concat": func(a []any, _ int64) int64 {
		var n int64
		for _, x := range a {
			n += length(x)
		}
		return slot * n
	},
	"flatten": func(a []any, left int64) int64 {
		if len(a) == 0 {
			return 0
		}
		return slot * leaves(a[0], left/slot+1)
	},
	"sort": func(a []any, _ int64) int64 { return 2 * slot * elems(a) },
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strLen(a []any, i int) int64 {
	if len(a) <= i {
		return 0
	}
	return int64(len(str(a[i])))
}

func elems(a []any) int64 {
	if len(a) == 0 {
		return 0
	}
	return length(a[0])
}

func arg0Size(a []any, factor, left int64) int64 {
	if len(a) == 0 {
		return 0
	}
	return size(a[0], 0, factor, left)
}

// count is how many times sep occurs in s, as strings.Split and strings.Replace see it (an
// empty sep: between every rune).
func count(s, sep string) int {
	if sep == "" {
		return utf8.RuneCountInString(s) + 1
	}
	return strings.Count(s, sep)
}

// parts is how many cuts split(s, sep, n?) makes.
func parts(a []any) int64 {
	if len(a) < 2 {
		return 0
	}
	n := int64(count(str(a[0]), str(a[1])))
	if len(a) > 2 {
		if lim := int64(runtime.ToInt(a[2])); lim >= 0 && lim < n {
			n = lim
		}
	}
	return n
}

// leaves counts the elements flatten would collect from v, stopping past limit.
func leaves(v any, limit int64) int64 {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return 1
	}
	var n int64
	for i := range rv.Len() {
		n += leaves(rv.Index(i).Interface(), limit-n)
		if n > limit {
			return n
		}
	}
	return n
}

// implementation is builtin name's own function, to call once its cost is charged.
func implementation(name string) func(args ...any) (any, error) {
	f := builtin.Builtins[builtin.Index[name]]
	switch {
	case f.Fast != nil:
		return func(args ...any) (any, error) { return f.Fast(args[0]), nil }
	case f.Safe != nil:
		return func(args ...any) (any, error) {
			v, _, err := f.Safe(args...)
			return v, err
		}
	default:
		return f.Func
	}
}

// add is the + operator: strings are concatenated only within the budget.
func add(m *meter, a, b any) (any, error) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			if err := m.charge(int64(len(x) + len(y))); err != nil {
				return nil, err
			}
			return x + y, nil
		}
	}
	return runtime.Add(a, b), nil
}

// makeRange is the .. operator: the ints of the range, within the budget.
func makeRange(m *meter, a, b any) (any, error) {
	lo, hi := runtime.ToInt(a), runtime.ToInt(b)
	n := int64(hi) - int64(lo) + 1
	if n <= 0 {
		return []int{}, nil
	}
	if n > math.MaxInt64/8 {
		n = -1
	} else {
		n *= 8
	}
	if err := m.charge(n); err != nil {
		return nil, err
	}
	out := make([]int, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out, nil
}
