package expression

import (
	"reflect"
)

// size is an upper estimate of the bytes v takes as text (its JSON, indented two spaces at
// depth, or its fmt form): strFactor bytes per string byte (6 covers JSON's \u00XX escapes, 1
// a string as it is), 32 per scalar, the punctuation and indentation of every member. It
// stops walking once the total passes left (left < 0: no limit), so measuring a huge value
// costs no more than the budget it is checked against.
func size(v any, depth, strFactor, left int64) int64 {
	s := &sizer{factor: strFactor, left: left}
	s.walk(v, depth)
	return s.n
}

type sizer struct {
	n, factor, left int64
}

func (s *sizer) over() bool { return s.left >= 0 && s.n > s.left }

func (s *sizer) walk(v any, depth int64) {
	if s.over() {
		return
	}
	member := 4 + 2*(depth+1) // comma, newline, indentation
	switch x := v.(type) {
	case nil, bool, int, int64, float64, float32, int32, uint, uint64:
		s.n += 32
	case string:
		s.n += s.factor*int64(len(x)) + 2
	case []byte:
		s.n += s.factor*int64(len(x)) + 2
	case map[string]any:
		s.n += 4 + 2*depth
		for k, e := range x {
			s.n += s.factor*int64(len(k)) + 4 + member
			s.walk(e, depth+1)
			if s.over() {
				return
			}
		}
	case []any:
		s.n += 4 + 2*depth
		for _, e := range x {
			s.n += member
			s.walk(e, depth+1)
			if s.over() {
				return
			}
		}
	case []string:
		s.n += 4 + 2*depth
		for _, e := range x {
			s.n += member + s.factor*int64(len(e)) + 2
			if s.over() {
				return
			}
		}
	case []int:
		s.n += 4 + 2*depth + int64(len(x))*(member+32)
	case []float64:
		s.n += 4 + 2*depth + int64(len(x))*(member+32)
	default:
		s.reflect(reflect.ValueOf(v), depth)
	}
}

// reflect measures the other containers expr-lang makes (groupBy's map[any][]any, typed
// slices and maps); anything else counts as a scalar.
func (s *sizer) reflect(rv reflect.Value, depth int64) {
	member := 4 + 2*(depth+1)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		s.n += 4 + 2*depth
		for i := range rv.Len() {
			s.n += member
			s.walk(rv.Index(i).Interface(), depth+1)
			if s.over() {
				return
			}
		}
	case reflect.Map:
		s.n += 4 + 2*depth
		it := rv.MapRange()
		for it.Next() {
			s.n += member + 4
			s.walk(it.Key().Interface(), depth+1)
			s.walk(it.Value().Interface(), depth+1)
			if s.over() {
				return
			}
		}
	case reflect.String:
		s.n += s.factor*int64(rv.Len()) + 2
	default:
		s.n += 64
	}
}

// length is the number of elements of an array or map value, 0 for anything else.
func length(v any) int64 {
	switch x := v.(type) {
	case []any:
		return int64(len(x))
	case map[string]any:
		return int64(len(x))
	case string:
		return int64(len(x))
	case nil:
		return 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		return int64(rv.Len())
	}
	return 0
}
