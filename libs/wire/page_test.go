package wire_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

// TestPageScope: a cursor is a position in one instance of a list; another instance (another
// run's logs, another filter) refuses it instead of skipping items from that position.
func TestPageScope(t *testing.T) {
	t.Parallel()
	logs := wire.LogsRule("logs")

	for _, tc := range []struct {
		name     string
		issuedBy wire.PageRule
		readBy   wire.PageRule
		ok       bool
	}{
		{"SameScope", logs.Scoped("run_a"), logs.Scoped("run_a"), true},
		{"OtherRun", logs.Scoped("run_a"), logs.Scoped("run_b"), false},
		{"UnscopedOnScoped", logs, logs.Scoped("run_a"), false},
		{"ScopedOnUnscoped", logs.Scoped("run_a"), logs, false},
		{"PartsAreKeptApart", logs.Scoped("ab", "c"), logs.Scoped("a", "bc"), false},
		{"EmptyFilterIsAFilter", logs.Scoped("org_1", ""), logs.Scoped("org_1", "wf_1"), false},
		{"OtherKindSameScope", wire.ListRule("runs").Scoped("run_a"), logs.Scoped("run_a"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.issuedBy.EncodeCursor("42")
			p, err := tc.readBy.ParsePage(url.Values{"after": {c}})
			if !tc.ok {
				var pe *wire.PageError
				require.ErrorAs(t, err, &pe)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{"42"}, p.After)
		})
	}

	t.Run("ScopeIsNotReadable", func(t *testing.T) {
		t.Parallel()
		c := logs.Scoped("run_secret").EncodeCursor("1")
		require.NotContains(t, c, "run_secret")
		require.Less(t, len(c), 80, "cursors stay short: %s", c)
	})
}

// TestPageForgedPosition: cursors are not signed, so a forged one may carry any position; one
// that EncodeCursor could not have written (NUL or other control characters, very long) is
// refused as a bad query rather than reaching the database (it was a 500).
func TestPageForgedPosition(t *testing.T) {
	t.Parallel()
	rule := wire.ListRule("runs")
	for _, pos := range [][]string{{"\x00", "\x00"}, {"2026-01-01T00:00:00Z", "run_\t1"}, {string(make([]byte, 201))}} {
		_, err := rule.ParsePage(url.Values{"after": {rule.EncodeCursor(pos...)}})
		var pe *wire.PageError
		require.ErrorAs(t, err, &pe, "%q", pos)
	}
	p, err := rule.ParsePage(url.Values{"after": {rule.EncodeCursor("2026-01-01T00:00:00.123Z", "run_01")}})
	require.NoError(t, err)
	require.Equal(t, []string{"2026-01-01T00:00:00.123Z", "run_01"}, p.After)
}
