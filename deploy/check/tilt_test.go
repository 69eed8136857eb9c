package check_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"svc.dev/deploy/check"
)

// TestTiltfile runs the Tiltfile against recorded stand-ins of Tilt's builtins and holds what
// it declares to issue 8: each service compiled on the host for linux without cgo, an image
// with a live update that syncs exactly that binary, the dev overlay applied through
// kustomize, a resource per service that waits for Postgres, Redis and its compile step,
// labels, and port-forwards to the gateway (8080) and Jaeger (16686) on ports they declare.
func TestTiltfile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tilt, err := check.RunTiltfile(b.root)
	require.NoError(t, err)

	require.Contains(t, tilt.Loads, "ext://restart_process")
	require.Len(t, tilt.Applied, 1, "one k8s_yaml")
	require.Equal(t, b.path("deploy", "k8s", "overlays", "dev"), tilt.Applied[0].Dir, "the dev overlay")
	applied := tilt.Applied[0]
	resources := tilt.Resources()
	workloads := tilt.Workloads()

	// Every k8s_resource names a workload that exists, and every dependency a resource.
	for name, r := range tilt.K8sResources {
		require.True(t, workloads[r.Workload], "k8s_resource %q: no workload %q in the applied YAML", name, r.Workload)
		for _, dep := range r.ResourceDeps {
			require.True(t, resources[dep], "k8s_resource %q: resource_deps names %q, which is no resource", name, dep)
		}
	}
	// Every image is deployed (Tilt warns about, and never builds, an unused one).
	used := map[string]bool{}
	for _, d := range applied.Deployments() {
		for _, c := range d.Spec.Template.Spec.Containers {
			used[imageRepo(c.Image)] = true
		}
	}
	for ref := range tilt.Images {
		require.True(t, used[ref], "image %s is built but no workload runs it", ref)
	}
	for name, lr := range tilt.LocalResources {
		require.False(t, workloads[name], "local_resource %q has the name of a workload", name)
		for _, dep := range lr.ResourceDeps {
			require.True(t, resources[dep], "local_resource %q: resource_deps names %q, which is no resource", name, dep)
		}
	}

	for _, svc := range b.services {
		r, ok := tilt.K8sResources[svc]
		require.True(t, ok, "k8s_resource for %s", svc)
		require.NotEmpty(t, r.Labels, "%s has a label (service group)", svc)
		require.Subset(t, r.ResourceDeps, []string{"postgres", "redis"}, "%s waits for the stores", svc)

		// Its compile step: go build of the service for linux, static.
		var compile *check.LocalResource
		for _, dep := range r.ResourceDeps {
			if lr, ok := tilt.LocalResources[dep]; ok {
				compile = &lr
			}
		}
		require.NotNil(t, compile, "%s depends on a local_resource that compiles it", svc)
		require.Contains(t, compile.Cmd, "go build")
		pkg := "./services/" + svc + "/cmd/" + svc
		require.Contains(t, strings.Fields(compile.Cmd), pkg, "%s: builds %s", compile.Name, pkg)
		require.DirExists(t, b.path(pkg))
		require.Equal(t, "linux", envOrInline(compile.Env, compile.Cmd, "GOOS"), "%s: GOOS", compile.Name)
		require.Equal(t, "0", envOrInline(compile.Env, compile.Cmd, "CGO_ENABLED"), "%s: CGO_ENABLED", compile.Name)
		require.Contains(t, compile.Cmd, "-X svc.dev/libs/buildinfo.version=", "%s: version stamp", compile.Name)
		require.Contains(t, compile.Deps, "services/"+svc, "%s reruns on changes to the service", compile.Name)
		require.Subset(t, compile.Deps, []string{"libs", "proto", "go.work"}, "%s reruns on shared code", compile.Name)
		require.NotEmpty(t, compile.Labels)
		out := flagValue(strings.Fields(compile.Cmd), "-o")
		require.NotEmpty(t, out, "%s: go build -o", compile.Name)

		// Its image: built around that binary, and live-updated by syncing it.
		d := applied.Deployment(svc)
		require.NotNil(t, d)
		ref := imageRepo(d.Spec.Template.Spec.Containers[0].Image)
		img, ok := tilt.Images[ref]
		require.True(t, ok, "docker_build_with_restart for %s (the image of Deployment %s)", ref, svc)
		require.Equal(t, svc, img.BuildArgs["SVC"])
		require.Len(t, img.Syncs, 1, "%s: live update syncs the binary", ref)
		require.Equal(t, filepath.Clean(out), filepath.Clean(img.Syncs[0].Local), "%s syncs what %s builds", ref, compile.Name)
		require.Equal(t, img.Entrypoint, []string{img.Syncs[0].Remote}, "%s restarts the synced binary", ref)
		require.Contains(t, img.Only, relPath(t, img.Context, out), "%s: the build context holds the binary", ref)
		require.FileExists(t, b.path(img.Dockerfile))
	}

	// Port-forwards: gateway on 8080, Jaeger on 16686, Prometheus on 9090, Grafana on 3000, each
	// to a port the pod declares.
	requireForward(t, tilt, applied, "gateway", 8080)
	requireForward(t, tilt, applied, "jaeger", 16686)
	requireForward(t, tilt, applied, "prometheus", 9090)
	requireForward(t, tilt, applied, "grafana", 3000)
	for _, store := range []string{"postgres", "redis"} {
		require.True(t, workloads[store], "the dev overlay has %s", store)
	}
}

func requireForward(t *testing.T, tilt *check.Tilt, applied *check.Rendered, workload string, local int) {
	t.Helper()
	r, ok := tilt.K8sResources[workload]
	require.True(t, ok, "k8s_resource %s", workload)
	d := applied.Deployment(workload)
	require.NotNil(t, d)
	for _, pf := range r.PortForwards {
		l, c, found := strings.Cut(pf, ":")
		if !found {
			c = l
		}
		if l != strconv.Itoa(local) {
			continue
		}
		port, err := strconv.Atoi(c)
		require.NoError(t, err, pf)
		require.True(t, declares(d.Spec.Template.Spec.Containers, int32(port)), "%s: forward %s to a port no container declares", workload, pf)
		return
	}
	require.Fail(t, "no port-forward", "%s does not forward localhost:%d (%v)", workload, local, r.PortForwards)
}

func declares(cs []corev1.Container, port int32) bool {
	for _, c := range cs {
		for _, p := range c.Ports {
			if p.ContainerPort == port {
				return true
			}
		}
	}
	return false
}

// envOrInline finds a variable in a local_resource's env, or set inline before the command.
func envOrInline(env map[string]string, cmd, name string) string {
	if v, ok := env[name]; ok {
		return v
	}
	for _, f := range strings.Fields(cmd) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func relPath(t *testing.T, base, target string) string {
	t.Helper()
	rel, err := filepath.Rel(base, target)
	require.NoError(t, err)
	return filepath.ToSlash(rel)
}
