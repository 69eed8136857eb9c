package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

func TestCheckJSON(t *testing.T) {
	t.Parallel()

	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, body   string
		pointer, msg string // msg: a fragment of the message; "" means accepted
	}{
		{name: "object", body: `{"a":1,"b":[1,2,{"c":"x"}],"d":null}`},
		{name: "syntax error is left to the decoder", body: `{"a":`},
		{name: "empty", body: ``},
		{name: "largest float", body: `{"n":1.7976931348623157e308}`},
		{name: "smallest float", body: `{"n":5e-324}`},
		{name: "zero forms", body: `[0, -0, 0.0, 0e10, 0E-400]`},
		{name: "big integer a float holds", body: `{"n":20000000000000112}`, pointer: "/n", msg: "more digits"},
		{name: "2^53", body: `{"n":9007199254740992}`},
		{name: "2^53+1", body: `{"n":9007199254740993}`, pointer: "/n", msg: "send it as a string"},
		{name: "integer literal past 2^53, even one a float holds", body: `{"n":100000000000000000000}`, pointer: "/n", msg: "send it as a string"},
		{name: "float form of a large integer", body: `{"n":1e20}`},
		{name: "overflow", body: `{"input":{"n":1e309}}`, pointer: "/input/n", msg: "outside the range of a 64-bit float"},
		{name: "negative overflow", body: `{"input":{"n":-1e400}}`, pointer: "/input/n", msg: "outside the range"},
		{name: "top-level overflow", body: `1e400`, pointer: "", msg: "outside the range"},
		{name: "underflow", body: `{"a":[1,1e-400]}`, pointer: "/a/1", msg: "would become 0"},
		{name: "long integer", body: `{"n":123456789012345678901234567890}`, pointer: "/n", msg: "123456789012345678901234567890 has more digits"},
		{name: "negative long integer", body: `[-123456789012345678901234567890]`, pointer: "/0", msg: "more digits"},
		{name: "duplicate member", body: `{"a":1,"b":2,"a":3}`, pointer: "/a", msg: `member "a" appears more than once`},
		{name: "nested duplicate", body: `{"x":[{"k":1},{"k":1,"k":2}]}`, pointer: "/x/1/k", msg: "more than once"},
		{name: "same member in sibling objects", body: `{"x":{"k":1},"y":{"k":1}}`},
		{name: "depth at the bound", body: deep(wire.MaxJSONDepth)},
		{name: "depth past the bound", body: deep(wire.MaxJSONDepth + 1), pointer: strings.Repeat("/0", 64), msg: "nests more than 64 levels"},
		{name: "very deep", body: deep(100000), pointer: strings.Repeat("/0", 64), msg: "nests more than 64 levels"},
		{name: "invalid UTF-8", body: "{\"a\":\"ok\",\"b\":\"\xff\xfe\"}", pointer: "/b", msg: "not valid UTF-8 (bad byte at offset 15)"},
		{name: "NUL", body: `{"a":["x","ab\u0000c"]}`, pointer: "/a/1", msg: "U+0000"},
		{name: "lone high surrogate", body: `{"a":"\ud800"}`, pointer: "/a", msg: "first half"},
		{name: "high surrogate then other escape", body: `{"a":"\ud800\u0041"}`, pointer: "/a", msg: "first half"},
		{name: "lone low surrogate", body: `{"a":"x\udc00"}`, pointer: "/a", msg: "second half"},
		{name: "surrogate pair", body: `{"a":"\ud83d\ude42 \u00e9 \\u0000 \" \\"}`},
		{name: "escapes in member names", body: `{"\u0000":1}`, pointer: "", msg: "U+0000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := wire.CheckJSON([]byte(tt.body))
			if tt.msg == "" {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, tt.pointer, err.Pointer)
			require.Contains(t, err.Message, tt.msg)
		})
	}
}

func TestPointerAt(t *testing.T) {
	t.Parallel()

	raw := []byte(`{"ops":[{"a":1},{"b":"x","c":[true,false]}]}`)
	require.Equal(t, "/ops/1/c/1", wire.PointerAt(raw, int64(strings.Index(string(raw), "false")+5)))
	require.Equal(t, "/ops/0/a", wire.PointerAt(raw, int64(strings.Index(string(raw), "1}")+1)))
}

// FuzzCheckJSON: whatever CheckJSON accepts, encoding/json decodes without a range error, and
// its value survives a round trip through encoding unchanged.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1e309]`, `{"a":1,"a":2}`, `[[[]]]`, `123456789012345678901234567890`, "\"\xff\"", `{"n":-0.0e-5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if wire.CheckJSON(raw) != nil || !json.Valid(raw) {
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("accepted %q, but it does not decode: %v", raw, err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("accepted %q, but it does not re-encode: %v", raw, err)
		}
		var w any
		if err := json.Unmarshal(again, &w); err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("accepted %q, re-encoded as %q, which decodes differently (%v)", raw, again, err)
		}
	})
}
