package check_test

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"

	"svc.dev/deploy/check"
)

// TestCompose: the compose file loads with the Compose specification's loader and runs every
// service from the one Dockerfile, hardened, each healthy only when its /ready answers on the
// port it listens on, in start order behind Postgres and Redis, with the gateway and Jaeger
// published.
func TestCompose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := check.LoadCompose(context.Background(), b.path("deploy", "docker", "compose.yaml"), map[string]string{})
	require.NoError(t, err)
	for _, name := range append(append([]string{}, b.services...), infra...) {
		require.Contains(t, p.Services, name, "compose service %s", name)
	}
	for _, svc := range b.services {
		s := p.Services[svc]
		require.NotNil(t, s.Build, "%s is built", svc)
		require.Equal(t, b.root, filepath.Clean(s.Build.Context), "%s: build context is the repository root (go.work)", svc)
		require.Equal(t, "deploy/docker/Dockerfile", filepath.ToSlash(relTo(t, b.root, s.Build.Context, s.Build.Dockerfile)))
		require.NotNil(t, s.Build.Args["SVC"])
		require.Equal(t, svc, *s.Build.Args["SVC"], "%s: build arg SVC", svc)
		require.Contains(t, s.Build.Args, "VERSION", "%s: version stamp", svc)

		// Hardened like the Kubernetes pods.
		require.True(t, s.ReadOnly, "%s: read_only", svc)
		require.NotEmpty(t, s.User, "%s: user", svc)
		require.False(t, strings.HasPrefix(s.User, "0") || strings.HasPrefix(s.User, "root"), "%s runs as root", svc)
		require.Contains(t, s.CapDrop, "ALL", "%s: cap_drop", svc)
		require.Contains(t, s.SecurityOpt, "no-new-privileges:true", "%s: security_opt", svc)

		// Healthy = /ready answers, probed on a port the service listens on.
		env := map[string]string{}
		for k, v := range s.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		addrs := listenPorts(t, env)
		require.NotNil(t, s.HealthCheck, "%s: healthcheck", svc)
		require.False(t, s.HealthCheck.Disable)
		test := s.HealthCheck.Test
		require.GreaterOrEqual(t, len(test), 3, "%s: healthcheck test", svc)
		require.Equal(t, []string{"CMD", "/probe"}, []string(test[:2]), "%s: the image has no shell; the probe binary is the check", svc)
		u, err := url.Parse(test[len(test)-1])
		require.NoError(t, err)
		require.Equal(t, "/ready", u.Path)
		port, _ := strconv.Atoi(u.Port())
		require.Equal(t, addrs[adminAddr(addrs)], int32(port), "%s: healthcheck port", svc)

		// Start order: the stores first, healthy.
		for _, store := range []string{"postgres", "redis"} {
			dep, ok := s.DependsOn[store]
			require.True(t, ok, "%s depends on %s", svc, store)
			require.Equal(t, types.ServiceConditionHealthy, dep.Condition, "%s waits for %s to be healthy", svc, store)
		}
		for name, dep := range s.DependsOn {
			if slices.Contains(b.services, name) {
				require.Equal(t, types.ServiceConditionHealthy, dep.Condition, "%s waits for %s to be healthy", svc, name)
			}
		}
		// Peer addresses name a compose service and the port it listens on.
		for k, v := range env {
			u, err := url.Parse(v)
			if err != nil || u.Host == "" || !slices.Contains(b.services, u.Hostname()) {
				continue
			}
			peerEnv := map[string]string{}
			for pk, pv := range p.Services[u.Hostname()].Environment {
				if pv != nil {
					peerEnv[pk] = *pv
				}
			}
			pp, _ := strconv.Atoi(u.Port())
			require.Contains(t, mapValues(listenPorts(t, peerEnv)), int32(pp), "%s: %s=%s: %s does not listen there", svc, k, v, u.Hostname())
		}
	}
	// The stores have real health checks, so service_healthy means something.
	for _, store := range []string{"postgres", "redis"} {
		require.NotNil(t, p.Services[store].HealthCheck, "%s: healthcheck", store)
		require.NotEmpty(t, p.Services[store].HealthCheck.Test)
	}
	// The gateway starts last, and the system is at localhost:8080, traces at localhost:16686.
	gw := p.Services["gateway"]
	for _, svc := range b.services {
		if svc != "gateway" {
			require.Contains(t, gw.DependsOn, svc, "the gateway starts after %s", svc)
		}
	}
	gwEnv := map[string]string{}
	for k, v := range gw.Environment {
		if v != nil {
			gwEnv[k] = *v
		}
	}
	_, public, err := net.SplitHostPort(gwEnv["SVC_PUBLIC_ADDR"])
	require.NoError(t, err)
	requirePublished(t, gw, "8080", public)
	requirePublished(t, p.Services["jaeger"], "16686", "16686")

	// The collector reads the one config file Kubernetes uses too.
	col := p.Services["otel-collector"]
	var mounted bool
	for _, v := range col.Volumes {
		if v.Type == types.VolumeTypeBind && filepath.Clean(v.Source) == b.path("deploy", "otel", "collector.yaml") {
			mounted = true
		}
	}
	require.True(t, mounted, "otel-collector mounts deploy/otel/collector.yaml")
}

func requirePublished(t *testing.T, s types.ServiceConfig, published, target string) {
	t.Helper()
	for _, p := range s.Ports {
		if p.Published == published && strconv.Itoa(int(p.Target)) == target {
			return
		}
	}
	require.Fail(t, "not published", "%s does not publish %s -> %s (ports %v)", s.Name, published, target, s.Ports)
}

// relTo resolves a Dockerfile path (relative to the build context) against root.
func relTo(t *testing.T, root, context, dockerfile string) string {
	t.Helper()
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(context, dockerfile)
	}
	rel, err := filepath.Rel(root, dockerfile)
	require.NoError(t, err)
	return rel
}

func mapValues(m map[string]int32) []int32 {
	var out []int32
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
