package route_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/webhook-ingress/internal/domain/route"
)

func TestTemplate(t *testing.T) {
	t.Parallel()

	t.Run("Match", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, template, path string
			want                 map[string]string // nil: no match
		}{
			{"Literal", "/github", "/github", map[string]string{}},
			{"LiteralOther", "/github", "/gitlab", nil},
			{"LiteralLonger", "/github", "/github/x", nil},
			{"TrailingSlash", "/github", "/github/", nil},
			{"Param", "/x/:p", "/x/v", map[string]string{"p": "v"}},
			{"ParamDoesNotTakeMore", "/x/:p", "/x/v/more", nil},
			{"ParamNeverEmpty", "/x/:p", "/x/", nil},
			{"ParamThenSlash", "/x/:p", "/x/v/", nil},
			{"ParamMissing", "/x/:p", "/x", nil},
			{"TwoParams", "/a/:b/c/:d", "/a/1/c/2", map[string]string{"b": "1", "d": "2"}},
			{"TwoParamsLiteralDiffers", "/a/:b/c/:d", "/a/1/x/2", nil},
			{"EscapedSlashStaysInParam", "/x/:p", "/x/a%2Fb", map[string]string{"p": "a/b"}},
			{"EscapedLiteral", "/events/:source", "/ev%65nts/acme", map[string]string{"source": "acme"}},
			{"BadEscape", "/x/:p", "/x/%zz", nil},
			{"NoLeadingSlash", "/x/:p", "x/v", nil},
			{"Empty", "/x", "", nil},
			{"DoubleSlash", "/x/:p", "//v", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tpl, err := route.ParseTemplate(tc.template)
				require.NoError(t, err)
				got, ok := tpl.Match(tc.path)
				if tc.want == nil {
					require.False(t, ok, "got %v", got)
					return
				}
				require.True(t, ok)
				require.Equal(t, tc.want, got)
			})
		}
	})

	t.Run("ParseRefuses", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"", "/", "x", "/x//y", "/x/", "/:", "/:a-b", "/:a/:a", "/a%2Fb", "/a?b", "/a#b"} {
			_, err := route.ParseTemplate(p)
			require.ErrorIs(t, err, route.ErrInvalid, "%q", p)
		}
	})

	t.Run("OpenAPIPath", func(t *testing.T) {
		t.Parallel()
		tpl, err := route.ParseTemplate("/events/:source/x")
		require.NoError(t, err)
		require.Equal(t, "/events/{source}/x", tpl.OpenAPIPath())
	})
}

func TestRegistry(t *testing.T) {
	t.Parallel()

	valid := func(method, path string) route.Route {
		return route.Route{
			Path: path, Method: method, Organization: "org", WorkflowName: "wf",
			InputSchema:    []byte(`{"type":"object"}`),
			FromRequest:    func(context.Context, route.Request) (any, error) { return map[string]any{}, nil },
			IdempotencyKey: func(route.Request) (string, error) { return "k", nil },
		}
	}

	t.Run("MatchOutcomes", func(t *testing.T) {
		t.Parallel()
		g := route.NewRegistry()
		require.NoError(t, g.Register(valid("POST", "/github")))
		require.NoError(t, g.Register(valid("POST", "/events/:source")))
		require.NoError(t, g.Register(valid("PUT", "/events/:source")))

		e, params, out := g.Match("POST", "/events/acme")
		require.Equal(t, route.Matched, out)
		require.Equal(t, "/events/:source", e.Route.Path)
		require.Equal(t, map[string]string{"source": "acme"}, params)

		e, _, out = g.Match("PUT", "/events/acme")
		require.Equal(t, route.Matched, out)
		require.Equal(t, "PUT", e.Route.Method)

		_, _, out = g.Match("GET", "/github")
		require.Equal(t, route.WrongMethod, out)
		_, _, out = g.Match("POST", "/events")
		require.Equal(t, route.NoRoute, out)
		_, _, out = g.Match("POST", "/events/acme/more")
		require.Equal(t, route.NoRoute, out)
	})

	t.Run("RefusesOverlapsAndIncompleteRoutes", func(t *testing.T) {
		t.Parallel()
		g := route.NewRegistry()
		require.NoError(t, g.Register(valid("POST", "/x/:p")))
		require.ErrorIs(t, g.Register(valid("POST", "/x/literal")), route.ErrInvalid, "overlaps /x/:p")
		require.ErrorIs(t, g.Register(valid("POST", "/:q/y")), route.ErrInvalid, "overlaps /x/:p at /x/y")
		require.NoError(t, g.Register(valid("POST", "/y/literal")))
		require.NoError(t, g.Register(valid("GET", "/x/literal")), "another method does not overlap")

		for name, mut := range map[string]func(*route.Route){
			"LowerMethod":   func(r *route.Route) { r.Method = "post" },
			"NoOrg":         func(r *route.Route) { r.Organization = "" },
			"NoWorkflow":    func(r *route.Route) { r.WorkflowName = "" },
			"NoFromRequest": func(r *route.Route) { r.FromRequest = nil },
			"NoKey":         func(r *route.Route) { r.IdempotencyKey = nil },
			"NoSchema":      func(r *route.Route) { r.InputSchema = nil },
			"SchemaNotJSON": func(r *route.Route) { r.InputSchema = []byte(`{`) },
			"SchemaBadType": func(r *route.Route) { r.InputSchema = []byte(`{"type":"nonsense"}`) },
			"BadPath":       func(r *route.Route) { r.Path = "z" },
		} {
			r := valid("POST", "/z/"+strings.ToLower(name))
			mut(&r)
			require.ErrorIs(t, g.Register(r), route.ErrInvalid, name)
		}
	})
}

// FuzzMatch holds the matcher to its rules for any template and path: no panic; a match has
// as many segments as the template, equal literal segments, and one non-empty value per param,
// from which the path can be rebuilt.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"/github", "/github"}, {"/events/:source", "/events/acme"}, {"/events/:source", "/events/acme/x"},
		{"/x/:p", "/x/"}, {"/x/:p", "/x/a%2Fb"}, {"/a/:b/c/:d", "/a/1/c/2"}, {"/x/:p", "/x/%zz"},
		{"/x", "//"}, {"/:a", "/%00"}, {"/x/:p", "/x/%2e%2e"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, template, path string) {
		tpl, err := route.ParseTemplate(template)
		if err != nil {
			return
		}
		params, ok := tpl.Match(path)
		if !ok {
			return
		}
		tSegs := strings.Split(template[1:], "/")
		pSegs := strings.Split(path[1:], "/")
		require.Len(t, pSegs, len(tSegs))
		for i, ts := range tSegs {
			v, err := url.PathUnescape(pSegs[i])
			require.NoError(t, err)
			require.NotEmpty(t, v)
			if name, isParam := strings.CutPrefix(ts, ":"); isParam {
				require.Equal(t, v, params[name])
			} else {
				require.Equal(t, ts, v)
			}
		}
		// Rebuilding the path from the template and the params matches again, to the same params.
		var b strings.Builder
		for _, ts := range tSegs {
			b.WriteByte('/')
			if name, isParam := strings.CutPrefix(ts, ":"); isParam {
				b.WriteString(url.PathEscape(params[name]))
			} else {
				b.WriteString(ts)
			}
		}
		rebuilt := b.String()
		again, ok := tpl.Match(rebuilt)
		require.True(t, ok, "rebuilt %q", rebuilt)
		require.Equal(t, params, again)
	})
}
