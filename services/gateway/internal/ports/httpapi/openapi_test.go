package httpapi

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/openapi"
)

// Every operation of the OpenAPI document reaches the service that serves it, guarded or
// open as the document says; the gateway's own operations are the ones it answers itself.
func TestRoutingMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	ops, err := openapi.Operations()
	require.NoError(t, err)
	param := regexp.MustCompile(`\{[^}]+\}`)
	var own []string
	for _, op := range ops {
		if op.Service == "gateway" {
			own = append(own, op.String())
			continue
		}
		p := param.ReplaceAllString(op.Path, "x1")
		rt, ok := match(table(), p)
		require.True(t, ok, "%s is not routed", op)
		require.Equal(t, Peer(op.Service), rt.Peer, "%s goes to the wrong service", op)
		require.Equal(t, op.Open, isOpen(table(), p), "%s: guarded or open differs from the document", op)
	}
	require.ElementsMatch(t, []string{"GET /health", "GET " + openAPIPath, "POST " + mcpPath}, own, "the gateway itself answers only /health, the document and MCP")
}
