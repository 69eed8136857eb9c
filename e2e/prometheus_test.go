package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
	"svc.dev/libs/testkit"
)

// TestPrometheusScrapesTheSystem runs a real Prometheus (Debian's prometheus binary) against
// the system, with the rules of deploy/prometheus/rules as they ship: every service's target
// comes up, the HTTP series of the start route move as the test starts runs (labelled with the
// route, which the start SLO's recording rules select), every name of
// deploy/prometheus/metrics.txt is scraped, the start SLO's rules evaluate to a 0 % error
// ratio, and the engine's counters hold exactly the runs the test started and saw complete;
// then, with the run-orchestrator stopped, ServiceDown goes pending for it and for nothing
// else. Only the scrape and evaluation intervals are shortened (to 1 s): the rules themselves
// are the shipped files, `for:` included, and pending is the state an alert takes at its first
// true evaluation.
func TestPrometheusScrapesTheSystem(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		skipUnlessRequired(t, "prometheus is not on PATH: install Debian's prometheus package (.ci/run does) to run Prometheus against the system")
	}
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"})
	prom := startPrometheus(t, bin, sys)

	// Every service is a target, and every one is up.
	targets := map[harness.Service]bool{}
	for _, s := range []harness.Service{harness.Gateway, harness.Identity, harness.Editor, harness.Orchestrator, harness.Scheduler, harness.Webhook} {
		targets[s] = true
	}
	prom.waitFor(t, "every service's target up", func() (bool, string) {
		var body struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		raw := prom.get(t, "/api/v1/targets", &body)
		up := 0
		for _, tg := range body.Data.ActiveTargets {
			if targets[harness.Service(tg.Labels["job"])] && tg.Health == "up" {
				up++
			}
		}
		return up == len(targets) && len(body.Data.ActiveTargets) == len(targets), raw
	})

	// Starts through the gateway: the start route's series count them, at the gateway (its
	// routing-table entry) and at the orchestrator (its route template).
	u := newRunsUser(t, sys, "prom").byAPIKey()
	wf := u.workflow("scraped", wfDef(wfBlocks(wfTrigger(nil), wfBlock("done", "log", map[string]any{"message": "ok"})), wfEdge("start", "done")))
	const starts = 20
	started := 0 // every run the test starts, the sleeping one included
	for range starts {
		u.startRun(wf, map[string]any{"input": map[string]any{}})
		started++
	}
	// A run that sleeps: its wake-up is the timer whose lateness is recorded.
	nap := u.workflow("nap", wfDef(wfBlocks(wfTrigger(nil), wfBlock("nap", "wait", map[string]any{"duration": "300ms"})), wfEdge("start", "nap")))
	u.waitStatus(u.startRun(nap, nil), "completed")
	started++
	for _, q := range []string{
		`sum(http_server_request_duration_seconds_count{job="gateway",http_request_method="POST",http_route="/api/workflows/*/run",http_response_status_code="202"})`,
		`sum(http_server_request_duration_seconds_count{job="run-orchestrator",http_request_method="POST",http_route="/api/workflows/{id}/run",http_response_status_code="202"})`,
	} {
		prom.waitFor(t, q+" >= "+strconv.Itoa(starts), func() (bool, string) {
			v, raw := prom.scalar(t, q)
			return v >= starts, raw
		})
	}
	// Every series deploy/prometheus/metrics.txt lists (the names the rules and dashboards
	// query) is scraped under that name. One is left out: a schedule's fire lateness appears
	// with the first fire, at a cron minute (the scheduler's own test records it).
	listed, err := os.ReadFile(filepath.Join(prom.root, "deploy", "prometheus", "metrics.txt"))
	require.NoError(t, err)
	for _, name := range strings.Fields(string(listed)) {
		if name == "svc_schedule_fire_lateness_seconds_bucket" {
			continue
		}
		prom.waitFor(t, name+" scraped", func() (bool, string) {
			v, raw := prom.scalar(t, "count("+name+")")
			return v > 0, raw
		})
	}

	// The shipped recording rule of the start SLO reads those series: no 5xx, ratio 0. A start
	// per poll keeps the rate above 0 (a counter that stood still since it appeared has a rate
	// of 0, and the ratio would be 0/0).
	prom.waitFor(t, "svc:start_error_ratio:rate5m == 0", func() (bool, string) {
		u.startRun(wf, map[string]any{"input": map[string]any{}})
		started++
		v, raw := prom.scalar(t, "svc:start_error_ratio:rate5m")
		return v == 0 && strings.Contains(raw, `"result":[{`), raw
	})

	// The engine's series as Prometheus holds them: the system is the test's own, so the runs
	// started by hand are exactly the test's, and every one of them completed (the log blocks
	// at once, the sleep above); each run's first block waited for a worker once at least, and
	// the sleep's wake-up was timed.
	prom.waitFor(t, fmt.Sprintf(`svc_runs_started_total{trigger="manual"} == %d`, started), func() (bool, string) {
		v, raw := prom.scalar(t, `sum(svc_runs_started_total{trigger="manual"})`)
		return v == float64(started), raw
	})
	prom.waitFor(t, fmt.Sprintf(`svc_runs_finished_total{status="completed"} == %d`, started), func() (bool, string) {
		v, raw := prom.scalar(t, `sum(svc_runs_finished_total{status="completed"})`)
		return v == float64(started), raw
	})
	for _, q := range []string{`sum(svc_attempt_schedule_to_start_seconds_count)`, `sum(svc_timer_lateness_seconds_count)`} {
		prom.waitFor(t, q+" > 0", func() (bool, string) {
			v, raw := prom.scalar(t, q)
			return v > 0, raw
		})
	}

	// The run-orchestrator stops: ServiceDown goes pending (or firing) for it, and for no other
	// job.
	orch := sys.Live(harness.Orchestrator)
	require.Len(t, orch, 1)
	orch[0].Stop(t)
	prom.waitFor(t, "ServiceDown pending for the run-orchestrator", func() (bool, string) {
		var body struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		raw := prom.get(t, "/api/v1/alerts", &body)
		found := false
		for _, a := range body.Data.Alerts {
			if a.Labels["alertname"] != "ServiceDown" {
				continue
			}
			require.Equal(t, string(harness.Orchestrator), a.Labels["job"], "ServiceDown for a service that runs: %s", raw)
			require.Equal(t, "page", a.Labels["severity"], raw)
			require.Contains(t, []string{"pending", "firing"}, a.State, raw)
			found = true
		}
		return found, raw
	})
}

// prometheus is one Prometheus process of a test.
type prometheus struct {
	base string
	root string // the repository's
	http *http.Client
}

// startPrometheus writes a scrape configuration for sys's services (every 1 s, the rules of
// deploy/prometheus/rules evaluated every 1 s), starts bin on a free port with a temporary
// storage directory, waits until it is ready and kills it when the test ends.
func startPrometheus(t *testing.T, bin string, sys *harness.System) *prometheus {
	t.Helper()
	gowork, err := exec.Command("go", "env", "GOWORK").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gowork)))
	rules := filepath.Join(root, "deploy", "prometheus", "rules", "*.yml")
	matches, err := filepath.Glob(rules)
	require.NoError(t, err)
	require.NotEmpty(t, matches, "no rule files at %s", rules)

	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	fmt.Fprintf(&cfg, "rule_files:\n  - %q\n", rules)
	fmt.Fprintf(&cfg, "scrape_configs:\n")
	for svc, base := range sys.URLs {
		if svc == harness.Gateway {
			base = sys.AdminURL // the gateway's /metrics is on its admin listener
		}
		u, err := url.Parse(base)
		require.NoError(t, err)
		fmt.Fprintf(&cfg, "  - job_name: %q\n    static_configs:\n      - targets: [%q]\n", svc, u.Host)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, []byte(cfg.String()), 0o600))

	addr := harness.FreeAddr(t)
	out := &testkit.SyncBuffer{}
	cmd := exec.Command(bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("--- prometheus output ---\n%s\n--- prometheus.yml ---\n%s", out.String(), cfg.String())
		}
	})

	p := &prometheus{base: "http://" + addr, root: root, http: &http.Client{Timeout: 2 * time.Second}}
	p.waitFor(t, "prometheus ready", func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", out.String())
		default:
		}
		resp, err := p.http.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// waitFor polls cond until it holds, failing the test after 60 s with cond's last word.
func (p *prometheus) waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s: not within 60 s; last: %s", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get reads one of the API's JSON answers into v and returns it raw ("" when unreachable).
func (p *prometheus) get(t *testing.T, path string, v any) string {
	t.Helper()
	resp, err := p.http.Get(p.base + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.NoError(t, json.Unmarshal(raw, v))
	return string(raw)
}

// scalar evaluates an instant query that yields at most one sample: its value, or -1 when it
// yields none.
func (p *prometheus) scalar(t *testing.T, query string) (float64, string) {
	t.Helper()
	var body struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	raw := p.get(t, "/api/v1/query?query="+url.QueryEscape(query), &body)
	if len(body.Data.Result) == 0 || len(body.Data.Result[0].Value) != 2 {
		return -1, raw
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, raw)
	return v, raw
}
