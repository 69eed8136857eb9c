package connectors_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
)

func TestSplitTemplate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []connectors.Segment
		err  error
	}{
		{"plain", []connectors.Segment{{Text: "plain"}}, nil},
		{"", nil, nil},
		{"{{ input.n * 2 }}", []connectors.Segment{{Text: "input.n * 2", Expr: true}}, nil},
		{"hi {{input.name}}, run {{ run.id }}!", []connectors.Segment{
			{Text: "hi "}, {Text: "input.name", Expr: true}, {Text: ", run "}, {Text: "run.id", Expr: true}, {Text: "!"},
		}, nil},
		{"a {{ x }} b {{ y", []connectors.Segment{{Text: "a "}, {Text: "x", Expr: true}, {Text: " b "}}, connectors.ErrUnclosedTemplate},
	} {
		got, err := connectors.SplitTemplate(tc.in)
		require.ErrorIs(t, err, tc.err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}
