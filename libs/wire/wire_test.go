package wire_test

import (
	"encoding/json"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

func TestID(t *testing.T) {
	t.Parallel()

	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = wire.NewID(wire.Run)
	}
	require.True(t, sort.StringsAreSorted(ids), "ids made in order sort in order")
	require.Regexp(t, `^run_[0-9a-z]{26}$`, ids[0])
	require.True(t, wire.ValidID(wire.Run, ids[0]))
	require.False(t, wire.ValidID(wire.Workflow, ids[0]))
	require.False(t, wire.ValidID(wire.Run, "run_nope"))
	require.False(t, wire.ValidID(wire.Run, "run_"+"zzzzzzzzzzzzzzzzzzzzzzzzzz"))
}

func TestTime(t *testing.T) {
	t.Parallel()

	ts := time.Date(2026, 11, 22, 2, 6, 44, 537_912_345, time.FixedZone("x", 3600))
	b, err := json.Marshal(struct{ At wire.Time }{wire.NewTime(ts)})
	require.NoError(t, err)
	require.JSONEq(t, `{"At":"2026-11-22T01:06:44.537Z"}`, string(b))

	b, err = json.Marshal(struct{ At wire.Time }{})
	require.NoError(t, err)
	require.JSONEq(t, `{"At":null}`, string(b))

	whole := wire.FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	require.Equal(t, "2026-01-02T03:04:05.000Z", whole, "three digits even when they are zero")
}

func TestPage(t *testing.T) {
	t.Parallel()
	rule := wire.ListRule("workflows")

	for _, tc := range []struct {
		name  string
		query string
		ok    bool
		limit int
	}{
		{"Default", "", true, 50},
		{"Max", "limit=500", true, 500},
		{"OverMaxIsRefusedNotClamped", "limit=501", false, 0},
		{"Zero", "limit=0", false, 0},
		{"NotANumber", "limit=ten", false, 0},
		{"NotACursor", "after=%%%", false, 0},
		{"ForeignCursor", "after=" + wire.LogsRule("logs").EncodeCursor("x"), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				q = url.Values{"after": {"%%%"}}
			}
			p, err := rule.ParsePage(q)
			if !tc.ok {
				var pe *wire.PageError
				require.ErrorAs(t, err, &pe)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.limit, p.Limit)
		})
	}

	t.Run("CursorRoundTrip", func(t *testing.T) {
		t.Parallel()
		c := rule.EncodeCursor("2026-11-22T01:06:44.537Z", "wf_01")
		p, err := rule.ParsePage(url.Values{"after": {c}})
		require.NoError(t, err)
		require.Equal(t, []string{"2026-11-22T01:06:44.537Z", "wf_01"}, p.After)
	})
}

func TestPointer(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/ops/3/params/a~1b~0c", wire.Pointer("ops", 3, "params", "a/b~c"))
}
