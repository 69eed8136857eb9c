package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/clients/apiclient"
	"svc.dev/tools/internal/workspace"
)

// webhookDelivery measures signed Standard Webhooks deliveries through the gateway (target:
// p99 ≤ 20 ms at 500/s), in two phases: new deliveries (a fresh webhook-id each, so every one
// starts a run through the orchestrator's StartRun) and redeliveries of those ids (answered
// from the Redis fast path, no run started).
//
// Why it runs a gateway and a webhook-ingress of its own: a route names its organization in
// the settings the service reads at start (SVC_WEBHOOK_STANDARD_ORG), and the scenario's
// organization is made by its own sign-up, after the system started (the other scenarios share
// that system and must not depend on this one's settings). So the scenario builds both binaries from this checkout and starts them with the route
// configured, the gateway pointing at the system's identity, editor, orchestrator and
// scheduler and at this webhook-ingress, both with the system's secret and Redis. The path
// measured is the production one: client → gateway → webhook-ingress → Redis / orchestrator.
type webhookDelivery struct{}

func (webhookDelivery) Name() string         { return "webhook-delivery" }
func (webhookDelivery) DefaultRate() float64 { return 500 }

const (
	webhookP99Target = 20 * time.Millisecond
	// webhookSecret is the Standard Webhooks secret of the scenario's route (24 random-looking
	// bytes, base64), known to the sender (bench) and the receiver alike.
	webhookSecret   = "whsec_YmVuY2gtd2ViaG9vay1zZWNyZXQtMjQtYnl0ZXM="
	webhookWorkflow = "bench-webhooks"
	webhookBody     = `{"type":"bench.delivery","data":{"ok":true}}`
	// ownOrchestratorURL and ownSchedulerURL are where the system bench starts has them
	// (systemEnv); with -no-system, SVC_ORCHESTRATOR_URL / SVC_SCHEDULER_URL or the defaults.
	ownOrchestratorURL = "http://127.0.0.1:18083"
	ownSchedulerURL    = "http://127.0.0.1:18084"
)

func (s webhookDelivery) Run(ctx context.Context, env Env) ([]Result, error) {
	if env.InternalSecret == "" {
		return nil, errors.New("setup: the system's SVC_INTERNAL_SECRET is unknown (with -no-system, export it)")
	}
	acct, keyed, err := signUpKeyed(ctx, env, s.Name())
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	def := json.RawMessage(`{"blocks":[{"block_id":"start","params":{},"type":"trigger.webhook"}],"edges":[]}`)
	wf, err := createWorkflow(ctx, keyed, apiclient.CreateWorkflowRequest{Name: webhookWorkflow, Definition: def})
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer deleteWorkflows(context.WithoutCancel(ctx), env, keyed, []string{wf.ID})

	pair, err := startWebhookPair(ctx, env, acct.organizationID)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer pair.stop(env)

	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	run := hex.EncodeToString(nonce[:])
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(webhookSecret, "whsec_"))
	if err != nil {
		return nil, err
	}
	url := pair.gatewayURL + "/api/webhooks/events/bench"
	// One delivery before any load, so a refusal says why at once.
	if err := probeDelivery(ctx, url, key, "probe-"+run); err != nil {
		return nil, fmt.Errorf("setup: probe delivery: %w", err)
	}

	newPhase := env.phase(webhookTarget(url, key, func(i int) string { return fmt.Sprintf("%s-%d", run, i) }))
	delivered := newPhase.Requests()
	env.Log("  POST %s (Standard Webhooks, a new webhook-id each: one run each) at %g/s, via a gateway on %s", url, env.Rate, pair.gatewayURL)
	fresh, err := env.Generator.Run(ctx, newPhase)
	if err != nil {
		return nil, err
	}
	// The runs of the first phase are still executing: let them finish, so that the second
	// phase measures the fast path and not the orchestrator's backlog.
	began := time.Now()
	if err := waitRunsDone(ctx, keyed, wf.ID, 3*time.Minute); err != nil {
		return nil, err
	}
	env.Log("  the runs of the first phase finished %s after it", time.Since(began).Round(100*time.Millisecond))
	env.Log("  the same %d webhook-ids again (redeliveries: Redis fast path, no run)", delivered)
	again, err := env.Generator.Run(ctx, env.phase(webhookTarget(url, key, func(i int) string { return fmt.Sprintf("%s-%d", run, i%delivered) })))
	if err != nil {
		return nil, err
	}
	return []Result{
		{Scenario: s.Name(), Phase: "new delivery via gateway → StartRun (202)", Stats: fresh},
		{Scenario: s.Name(), Phase: "redelivery via gateway, Redis hit (202)", Stats: again, Note: webhookFinding(fresh, again)},
	}, nil
}

// waitRunsDone polls the workflow's runs until none is queued or running.
func waitRunsDone(ctx context.Context, keyed *apiclient.Client, wf string, within time.Duration) error {
	err := pollUntil(ctx, 250*time.Millisecond, within, func() (bool, error) {
		busy := 0
		for _, status := range []string{"queued", "running"} {
			page, err := keyed.ListRunsPage(ctx, "", wf, status, "", 1)
			if err != nil {
				return false, err
			}
			busy += len(page.Items)
		}
		return busy == 0, nil
	})
	if errors.Is(err, errNotWithin) {
		return fmt.Errorf("runs of %s still queued or running %s after the first phase", wf, within)
	}
	return err
}

// webhookTarget signs each request anew: its own webhook-id (idOf(i)) and the current time.
func webhookTarget(url string, key []byte, idOf func(i int) string) Target {
	return Target{
		Method: http.MethodPost,
		URL:    url,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(webhookBody),
		Prepare: func(i int, req *http.Request) {
			signDelivery(req.Header, key, idOf(i), time.Now())
		},
		Expect: http.StatusAccepted,
		Check:  webhookAccepted,
	}
}

// signDelivery sets the Standard Webhooks headers of one delivery of webhookBody.
func signDelivery(h http.Header, key []byte, id string, at time.Time) {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + webhookBody))
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
}

// webhookAccepted is a Target.Check: the 202 must name a run.
func webhookAccepted(body []byte) error {
	var a struct {
		WorkflowRunID string `json:"workflowRunId"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if !strings.HasPrefix(a.WorkflowRunID, "run_") {
		return fmt.Errorf("no workflowRunId in %s", clip(string(body), 200))
	}
	return nil
}

func probeDelivery(ctx context.Context, url string, key []byte, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(webhookBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	signDelivery(req.Header, key, id, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d: %s", resp.StatusCode, clip(buf.String(), 300))
	}
	return webhookAccepted(buf.Bytes())
}

func webhookFinding(fresh, again Stats) string {
	if fresh.TransportErrors+fresh.StatusErrors+again.TransportErrors+again.StatusErrors > 0 {
		return fmt.Sprintf("errors in a phase: target (issue 6: delivery p99 ≤ %d ms at 500/s) not checked.", webhookP99Target.Milliseconds())
	}
	judge := func(st Stats) string {
		if st.TargetRate < 500 {
			return "below the target's rate, not judged"
		}
		return verdict(st.P99 <= webhookP99Target)
	}
	return fmt.Sprintf("target (issue 6: delivery p99 ≤ %d ms at 500/s): new deliveries at %.0f/s p50 %s ms, p99 %s ms, %s; redeliveries at %.0f/s p50 %s ms, p99 %s ms, %s.",
		webhookP99Target.Milliseconds(), fresh.TargetRate, millis(fresh.P50), millis(fresh.P99), judge(fresh),
		again.TargetRate, millis(again.P50), millis(again.P99), judge(again))
}

// webhookPair is the gateway and webhook-ingress the scenario runs.
type webhookPair struct {
	gatewayURL  string
	redisURL    string
	redisPrefix string
	dir         string
	procs       []*exec.Cmd
	done        []chan struct{}
	out         *lockedTail
}

// startWebhookPair builds gateway and webhook-ingress from this checkout and starts them with
// the Standard Webhooks route pointed at org's bench-webhooks workflow.
func startWebhookPair(ctx context.Context, env Env, org string) (p *webhookPair, err error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := workspace.Root(wd)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-webhooks-")
	if err != nil {
		return nil, err
	}
	p = &webhookPair{dir: dir, out: &lockedTail{t: tailBuffer{max: 40}}}
	defer func() {
		if err != nil {
			p.stop(env)
			err = fmt.Errorf("%w\nlast output:\n%s", err, p.out.String())
		}
	}()
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/",
		"svc.dev/services/gateway/cmd/gateway", "svc.dev/services/webhook-ingress/cmd/webhook-ingress")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return p, fmt.Errorf("go build: %w\n%s", err, out)
	}
	addrs := make([]string, 3)
	for i := range addrs {
		if addrs[i], err = freeLoopback(); err != nil {
			return p, err
		}
	}
	gatewayAddr, adminAddr, webhookAddr := addrs[0], addrs[1], addrs[2]
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	p.gatewayURL = "http://" + gatewayAddr
	p.redisURL = cmp.Or(os.Getenv("SVC_REDIS_URL"), "redis://127.0.0.1:6379/0")
	p.redisPrefix = "bench-webhooks-" + hex.EncodeToString(nonce[:]) + ":"
	orchestrator, scheduler := ownOrchestratorURL, ownSchedulerURL
	if env.IdentityURL != ownIdentityURL {
		orchestrator = cmp.Or(os.Getenv("SVC_ORCHESTRATOR_URL"), "http://127.0.0.1:8083")
		scheduler = cmp.Or(os.Getenv("SVC_SCHEDULER_URL"), "http://127.0.0.1:8084")
	}
	common := map[string]string{
		"SVC_INTERNAL_SECRET": env.InternalSecret, "SVC_REDIS_URL": p.redisURL, "SVC_REDIS_PREFIX": p.redisPrefix,
		"SVC_LOG_LEVEL": "warn", "SVC_ORCHESTRATOR_URL": orchestrator,
	}
	webhook := map[string]string{
		"SVC_WEBHOOK_ADDR":              webhookAddr,
		"SVC_WEBHOOK_STANDARD_SECRET":   webhookSecret,
		"SVC_WEBHOOK_STANDARD_ORG":      org,
		"SVC_WEBHOOK_STANDARD_WORKFLOW": webhookWorkflow,
	}
	gateway := map[string]string{
		"SVC_PUBLIC_ADDR": gatewayAddr, "SVC_GATEWAY_ADMIN_ADDR": adminAddr, "SVC_RATE_LIMIT_PER_MINUTE": "1000000",
		"SVC_IDENTITY_URL": env.IdentityURL, "SVC_EDITOR_URL": env.EditorURL, "SVC_SCHEDULER_URL": scheduler,
		"SVC_WEBHOOK_URL": "http://" + webhookAddr,
	}
	for _, s := range []struct {
		name   string
		extra  map[string]string
		health string
	}{
		{"webhook-ingress", webhook, "http://" + webhookAddr + "/ready"},
		{"gateway", gateway, "http://" + adminAddr + "/health"},
	} {
		envs := map[string]string{}
		for k, v := range common {
			envs[k] = v
		}
		for k, v := range s.extra {
			envs[k] = v
		}
		cmd := exec.Command(filepath.Join(dir, s.name))
		cmd.Env = withEnv(scrubSVC(os.Environ()), envs)
		w := &prefixWriter{prefix: s.name + " | ", w: p.out, tail: &tailBuffer{max: 1}}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			return p, fmt.Errorf("start %s: %w", s.name, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		p.procs = append(p.procs, cmd)
		p.done = append(p.done, done)
		// /ready for webhook-ingress: it checks Redis, which the fast path needs.
		if err := waitHealthy(ctx, s.health, time.Minute, done); err != nil {
			return p, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return p, nil
}

// stop ends the processes the scenario started (SIGTERM, then SIGKILL after 15 s), removes the
// binaries and deletes the Redis keys its webhook-ingress wrote.
func (p *webhookPair) stop(env Env) {
	for i := len(p.procs) - 1; i >= 0; i-- {
		_ = p.procs[i].Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done[i]:
		case <-time.After(15 * time.Second):
			_ = p.procs[i].Process.Kill()
			<-p.done[i]
		}
	}
	p.procs, p.done = nil, nil
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
	if p.redisPrefix == "" {
		return
	}
	opts, err := redis.ParseURL(p.redisURL)
	if err != nil {
		return
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	iter := c.Scan(ctx, 0, p.redisPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if c.Del(ctx, iter.Val()).Err() == nil {
			n++
		}
	}
	if err := iter.Err(); err != nil {
		env.Log("  could not delete the Redis keys under %s: %v", p.redisPrefix, err)
		return
	}
	env.Log("  deleted %d Redis keys under %s", n, p.redisPrefix)
}

// scrubSVC drops SVC_* and OTEL_* settings of bench's own environment, which could point the
// scenario's processes at another system; what they need is set explicitly.
func scrubSVC(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "SVC_") && !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// lockedTail keeps the last lines the scenario's processes printed.
type lockedTail struct {
	mu sync.Mutex
	t  tailBuffer
}

func (l *lockedTail) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		l.t.add(line)
	}
	return len(b), nil
}

func (l *lockedTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.String()
}
