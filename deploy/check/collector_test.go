package check_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"svc.dev/deploy/check"
)

// collectorConfig is the part of an OpenTelemetry Collector configuration the checks read.
type collectorConfig struct {
	Extensions map[string]any `json:"extensions"`
	Receivers  map[string]struct {
		Protocols map[string]struct {
			Endpoint string `json:"endpoint"`
		} `json:"protocols"`
	} `json:"receivers"`
	Processors map[string]any `json:"processors"`
	Exporters  map[string]struct {
		Endpoint string `json:"endpoint"`
	} `json:"exporters"`
	Service struct {
		Extensions []string `json:"extensions"`
		Pipelines  map[string]struct {
			Receivers  []string `json:"receivers"`
			Processors []string `json:"processors"`
			Exporters  []string `json:"exporters"`
		} `json:"pipelines"`
	} `json:"service"`
}

// TestCollectorConfig: deploy/otel/collector.yaml is wired: every component a pipeline or the
// service names is defined, the services export to the port its OTLP/HTTP receiver listens
// on, and each ${env:...} it uses is set for the collector in Compose and in Kubernetes, to
// an address of Jaeger.
func TestCollectorConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw, err := os.ReadFile(b.path("deploy", "otel", "collector.yaml"))
	require.NoError(t, err)
	var cfg collectorConfig
	require.NoError(t, yaml.Unmarshal(raw, &cfg)) // partial: only the wiring is read

	require.Contains(t, cfg.Service.Pipelines, "traces")
	for name, p := range cfg.Service.Pipelines {
		require.NotEmpty(t, p.Receivers, "pipeline %s: receivers", name)
		require.NotEmpty(t, p.Exporters, "pipeline %s: exporters", name)
		for _, id := range p.Receivers {
			require.Contains(t, cfg.Receivers, id, "pipeline %s: receiver %s is not defined", name, id)
		}
		for _, id := range p.Processors {
			require.Contains(t, cfg.Processors, id, "pipeline %s: processor %s is not defined", name, id)
		}
		for _, id := range p.Exporters {
			require.Contains(t, cfg.Exporters, id, "pipeline %s: exporter %s is not defined", name, id)
		}
	}
	for _, id := range cfg.Service.Extensions {
		require.Contains(t, cfg.Extensions, id, "extension %s is not defined", id)
	}

	// The OTLP/HTTP receiver's port is where the services send (OTLP/HTTP exporter).
	httpRecv := cfg.Receivers["otlp"].Protocols["http"].Endpoint
	_, recvPort, err := net.SplitHostPort(httpRecv)
	require.NoError(t, err, "otlp http receiver endpoint %q", httpRecv)

	r, err := check.Render(b.path("deploy", "k8s", "overlays", "dev"))
	require.NoError(t, err)
	p, err := check.LoadCompose(context.Background(), b.path("deploy", "docker", "compose.yaml"), map[string]string{})
	require.NoError(t, err)
	for _, svc := range b.services {
		d := r.Deployment(svc)
		env, _ := r.Env(d.Spec.Template.Spec.Containers[0])
		requireEndpointPort(t, "k8s "+svc, env["OTEL_EXPORTER_OTLP_ENDPOINT"], recvPort)
		cv := p.Services[svc].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
		require.NotNil(t, cv, "compose %s: OTEL_EXPORTER_OTLP_ENDPOINT", svc)
		requireEndpointPort(t, "compose "+svc, *cv, recvPort)
	}

	// ${env:NAME} in the config: set for the collector in both places.
	col := r.Deployment("otel-collector")
	require.NotNil(t, col)
	colEnv, missing := r.Env(col.Spec.Template.Spec.Containers[0])
	require.Empty(t, missing)
	refs := regexp.MustCompile(`\$\{env:(\w+)\}`).FindAllStringSubmatch(string(raw), -1)
	for _, ref := range refs {
		v, ok := colEnv[ref[1]]
		require.True(t, ok, "k8s otel-collector: %s is not set", ref[1])
		requireAddressResolves(t, r, "otel-collector", ref[1], v)
		cv := p.Services["otel-collector"].Environment[ref[1]]
		require.NotNil(t, cv, "compose otel-collector: %s is not set", ref[1])
		host, _, err := net.SplitHostPort(*cv)
		require.NoError(t, err)
		require.Contains(t, p.Services, host, "compose otel-collector: %s=%s names no service", ref[1], *cv)
	}

	// Kubernetes mounts the config where --config looks for it.
	c := col.Spec.Template.Spec.Containers[0]
	var configPath string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			configPath = v
		}
	}
	require.NotEmpty(t, configPath, "otel-collector --config")
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(configPath) {
			mounted = true
		}
	}
	require.True(t, mounted, "otel-collector: nothing mounted at %s", path.Dir(configPath))
}

func requireEndpointPort(t *testing.T, where, endpoint, port string) {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err, "%s: OTEL_EXPORTER_OTLP_ENDPOINT=%q", where, endpoint)
	require.Equal(t, port, u.Port(), "%s: OTEL_EXPORTER_OTLP_ENDPOINT=%s is not the collector's OTLP/HTTP port", where, endpoint)
}
