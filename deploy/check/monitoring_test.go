package check_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"svc.dev/deploy/check"
)

// synthetic are the series Prometheus makes itself, which no service exposes: they are used
// by the rules but not listed in metrics.txt (which is checked against live /metrics).
var synthetic = map[string]bool{"up": true}

// runbookURL is what every alert's runbook_url looks like: a section of docs/OPERATIONS.md.
var runbookURL = regexp.MustCompile(`^docs/OPERATIONS\.md#([a-z0-9_-]+)$`)

// TestAlertRules: every alert is labelled page or ticket, says what happened and links a
// runbook section that exists in docs/OPERATIONS.md; every recorded series an expression uses
// is recorded; and every metric name the rules and the dashboards use is listed, exactly, in
// deploy/prometheus/metrics.txt.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files, err := check.LoadRules(b.path("deploy", "prometheus", "rules", "*.yml"))
	require.NoError(t, err)
	anchors, err := check.MarkdownAnchors(b.path("docs", "OPERATIONS.md"))
	require.NoError(t, err)

	recorded := map[string]bool{}
	alerts := map[string]bool{}
	var exprs []string
	for path, f := range files {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				require.NotEmpty(t, r.Expr, "%s: group %s: a rule without expr", path, g.Name)
				require.True(t, (r.Record == "") != (r.Alert == ""), "%s: group %s: a rule is a record or an alert", path, g.Name)
				exprs = append(exprs, r.Expr)
				if r.Record != "" {
					require.False(t, recorded[r.Record], "%s recorded twice", r.Record)
					require.Contains(t, r.Record, ":", "%s: recorded series are named level:metric:operations", r.Record)
					recorded[r.Record] = true
					continue
				}
				require.False(t, alerts[r.Alert], "alert %s defined twice", r.Alert)
				alerts[r.Alert] = true
				require.Contains(t, []string{"page", "ticket"}, r.Labels["severity"], "%s: severity", r.Alert)
				for _, a := range []string{"summary", "description", "runbook_url"} {
					require.NotEmpty(t, r.Annotations[a], "%s: annotation %s", r.Alert, a)
				}
				m := runbookURL.FindStringSubmatch(r.Annotations["runbook_url"])
				require.NotNil(t, m, "%s: runbook_url %q is not docs/OPERATIONS.md#<anchor>", r.Alert, r.Annotations["runbook_url"])
				require.True(t, anchors[m[1]], "%s: docs/OPERATIONS.md has no section #%s", r.Alert, m[1])
				require.Equal(t, strings.ToLower(r.Alert), m[1], "%s: the runbook section is named after the alert", r.Alert)
			}
		}
	}
	require.NotEmpty(t, alerts)

	dashboards, err := filepath.Glob(b.path("deploy", "grafana", "dashboards", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, dashboards)
	for _, path := range dashboards {
		d, err := check.LoadDashboard(path)
		require.NoError(t, err)
		for _, p := range d.AllPanels() {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
	}

	used := map[string]bool{}
	for _, e := range exprs {
		names, err := check.MetricNames(e)
		require.NoError(t, err)
		for _, n := range names {
			switch {
			case strings.Contains(n, ":"):
				require.True(t, recorded[n], "%s is used but no rule records it (in %q)", n, e)
			case !synthetic[n]:
				used[n] = true
			}
		}
	}
	listed, err := check.ReadLines(b.path("deploy", "prometheus", "metrics.txt"))
	require.NoError(t, err)
	require.True(t, slices.IsSorted(listed), "metrics.txt is sorted")
	require.Equal(t, check.SortedKeys(used), listed, "deploy/prometheus/metrics.txt lists exactly the metric names the rules and dashboards use")
}

// TestMetricNames holds the extraction of metric names from PromQL to the cases the rules and
// dashboards have.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`sum by (job) (rate(http_server_request_duration_seconds_count{job="gateway",http_route="/api/{x}/run"}[5m]))`: {"http_server_request_duration_seconds_count"},
		`(sum(rate(a_total{s=~"5.."}[1h])) or vector(0)) / sum(rate(a_total[1h])) > (14.4 * 0.001)`:                    {"a_total"},
		`histogram_quantile(0.99, sum by (type, le) (rate(b_bucket{job="$job"}[$__rate_interval])))`:                   {"b_bucket"},
		`x:y:rate5m > 1 and on (job) max by (job) (up{job=~"a|b"}) == 0 unless ignoring(instance) c`:                   {"x:y:rate5m", "up", "c"},
		`sum by (instance) (rate(ns_total[5m])) / 1e9 / d offset 5m`:                                                   {"ns_total", "d"},
		`e * on (job) group_left (version) target_info # comment f`:                                                    {"e", "target_info"},
		`max without (instance) (g) + count by (le)(h) - topk(3, i)`:                                                   {"g", "h", "i"},
		`0.001`: nil,
	} {
		got, err := check.MetricNames(expr)
		require.NoError(t, err, expr)
		require.Equal(t, want, got, expr)
	}
	_, err := check.MetricNames(`a{b="c}`)
	require.Error(t, err)
}

// TestDashboards: every dashboard is valid JSON with a unique uid, every panel has a unique id
// and queries the provisioned Prometheus data source, every dashboard is in the dev overlay's
// ConfigMap, and Compose mounts the same files.
func TestDashboards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ds struct {
		Datasources []struct {
			UID  string `json:"uid"`
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"datasources"`
	}
	raw, err := os.ReadFile(b.path("deploy", "grafana", "provisioning", "datasources", "prometheus.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &ds))
	require.Len(t, ds.Datasources, 1)
	require.Equal(t, "prometheus", ds.Datasources[0].Type)
	require.Equal(t, "http://prometheus:9090", ds.Datasources[0].URL, "the Prometheus Service / Compose service")

	var kust struct {
		ConfigMapGenerator []struct {
			Name  string   `json:"name"`
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	raw, err = os.ReadFile(b.path("deploy", "grafana", "kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &kust))
	inConfigMap := map[string]bool{}
	for _, g := range kust.ConfigMapGenerator {
		for _, f := range g.Files {
			inConfigMap[f] = true
		}
	}

	dashboards, err := filepath.Glob(b.path("deploy", "grafana", "dashboards", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, dashboards)
	uids := map[string]bool{}
	for _, path := range dashboards {
		d, err := check.LoadDashboard(path)
		require.NoError(t, err)
		require.NotEmpty(t, d.UID, path)
		require.False(t, uids[d.UID], "%s: uid %s used twice", path, d.UID)
		uids[d.UID] = true
		require.True(t, inConfigMap["dashboards/"+filepath.Base(path)], "%s is not in deploy/grafana/kustomization.yaml", path)
		ids := map[int]bool{}
		queries := 0
		for _, p := range d.AllPanels() {
			require.False(t, ids[p.ID], "%s: panel id %d used twice", path, p.ID)
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Title, "%s: panel %d has no title", path, p.ID)
			require.Equal(t, ds.Datasources[0].UID, p.Datasource["uid"], "%s: panel %q queries another data source", path, p.Title)
			require.NotEmpty(t, p.Targets, "%s: panel %q has no query", path, p.Title)
			for _, tg := range p.Targets {
				require.NotEmpty(t, tg.Expr, "%s: panel %q: empty query", path, p.Title)
				queries++
			}
		}
		require.Positive(t, queries, path)
	}

	// Compose runs Prometheus and Grafana on the same files.
	p, err := check.LoadCompose(t.Context(), b.path("deploy", "docker", "compose.yaml"), map[string]string{})
	require.NoError(t, err)
	binds := func(svc string) map[string]string {
		out := map[string]string{}
		for _, v := range p.Services[svc].Volumes {
			if v.Type == types.VolumeTypeBind {
				out[filepath.Clean(v.Source)] = v.Target
			}
		}
		return out
	}
	prom := binds("prometheus")
	require.Equal(t, "/etc/prometheus/prometheus.yml", prom[b.path("deploy", "prometheus", "prometheus.yml")])
	require.Equal(t, "/etc/prometheus/rules", prom[b.path("deploy", "prometheus", "rules")])
	graf := binds("grafana")
	require.Equal(t, "/etc/grafana/provisioning", graf[b.path("deploy", "grafana", "provisioning")])
	require.Equal(t, "/var/lib/grafana/dashboards", graf[b.path("deploy", "grafana", "dashboards")])
	requirePublished(t, p.Services["prometheus"], "9090", "9090")
	requirePublished(t, p.Services["grafana"], "3000", "3000")
}

// TestAlertTestsCoverEveryAlert: deploy/prometheus/tests has, for every alert, a case where it
// fires and one where it does not.
func TestAlertTestsCoverEveryAlert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files, err := check.LoadRules(b.path("deploy", "prometheus", "rules", "*.yml"))
	require.NoError(t, err)
	tests, err := filepath.Glob(b.path("deploy", "prometheus", "tests", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, path := range tests {
		var f struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(raw, &f), path)
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	for _, f := range files {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				require.True(t, fires[r.Alert], "no test of %s firing in deploy/prometheus/tests", r.Alert)
				require.True(t, quiet[r.Alert], "no test of %s not firing in deploy/prometheus/tests", r.Alert)
			}
		}
	}
}

// TestPromtool runs Prometheus's own checks: the rules and the scrape configuration load,
// every test of deploy/prometheus/tests passes, and every dashboard query parses (as the
// expression of a throwaway recording rule, Grafana's variables replaced). It needs promtool
// (Debian's prometheus package; .ci/run installs it): without it the test skips, or fails
// with SVC_E2E_REQUIRE_TOOLS=1.
func TestPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		why := "promtool is not on PATH: install Debian's prometheus package (.ci/run does) to check the alert rules"
		if os.Getenv("SVC_E2E_REQUIRE_TOOLS") == "1" {
			t.Fatalf("SVC_E2E_REQUIRE_TOOLS=1 and %s", why)
		}
		t.Skip(why)
	}
	b := setup(t)
	dir := b.path("deploy", "prometheus")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
	rules, err := filepath.Glob(filepath.Join(dir, "rules", "*.yml"))
	require.NoError(t, err)
	tests, err := filepath.Glob(filepath.Join(dir, "tests", "*.yml"))
	require.NoError(t, err)
	run(append([]string{"check", "rules"}, rules...)...)
	run(append([]string{"test", "rules"}, tests...)...)
	run("check", "config", "prometheus.yml")

	dashboards, err := filepath.Glob(b.path("deploy", "grafana", "dashboards", "*.json"))
	require.NoError(t, err)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", "gateway")
	var group check.RuleGroup
	group.Name = "dashboards"
	for _, path := range dashboards {
		d, err := check.LoadDashboard(path)
		require.NoError(t, err)
		for _, p := range d.AllPanels() {
			for _, tg := range p.Targets {
				group.Rules = append(group.Rules, check.Rule{Record: fmt.Sprintf("dashboard:query_%d:check", len(group.Rules)), Expr: vars.Replace(tg.Expr)})
			}
		}
	}
	out, err := yaml.Marshal(check.RuleFile{Groups: []check.RuleGroup{group}})
	require.NoError(t, err)
	queries := filepath.Join(t.TempDir(), "dashboards.yml")
	require.NoError(t, os.WriteFile(queries, out, 0o600))
	run("check", "rules", queries)
}
