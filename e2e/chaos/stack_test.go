package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/e2e/harness"
	"svc.dev/libs/testkit"
)

const (
	origin = "http://chaos.test"
	// whSecret is the Standard Webhooks secret of the suite's webhook route.
	whSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	hookWF   = "chaos-hook"
)

// Roles name the processes the faults kill: one per service, two run-orchestrator replicas
// (orchestrator-1 is the one the gateway, scheduler and webhook-ingress speak to).
const (
	roleOrch1 = "run-orchestrator-1"
	roleOrch2 = "run-orchestrator-2"
)

// stack is one system on private servers, with the sink its workflows call, the proxies that
// cut it apart and the suite's user.
type stack struct {
	t     *testing.T
	pg    *harness.Postgres
	redis *harness.Redis
	sys   *harness.System
	db    *pgxpool.Pool
	sink  *sink
	rec   *recorder
	api   *api
	// kept holds the finished runs seen while the workload ran, when the system deletes
	// finished runs (the soak's retention); nil otherwise.
	kept *archive

	mu    sync.Mutex
	procs map[string]*harness.Process // role → the live process
	cuts  map[string]*testkit.Proxy   // "gateway→run-orchestrator-1", ...

	slug string
	wf   map[string]string // workload kind → workflow id
}

type stackOptions struct {
	pprof    bool
	logLevel string
	// orchestrator is added to both run-orchestrator replicas' settings.
	orchestrator map[string]string
}

func setup(t *testing.T, o stackOptions) *stack {
	t.Helper()
	s := &stack{t: t, procs: map[string]*harness.Process{}, cuts: map[string]*testkit.Proxy{}, wf: map[string]string{}, rec: &recorder{}}
	s.pg = harness.StartPostgres(t)
	s.redis = harness.StartRedis(t)
	dbURL := s.pg.NewDatabase(t)
	s.sink = newSink(t)
	s.slug = "chaos-" + randHex(4)

	s.sys = harness.New(t, harness.Options{
		DatabaseURL: dbURL,
		RedisURL:    s.redis.URL,
		Pprof:       o.pprof,
		Env: map[string]string{
			"SVC_TRUSTED_ORIGINS": origin,
			"SVC_LOG_LEVEL":       o.logLevel,
			// One user drives the whole workload; its bucket must not be the bottleneck.
			"SVC_RATE_LIMIT_PER_MINUTE": "1000000",
			// The scheduler ticks by itself too, racing the suite's parallel ticks.
			"SVC_SCHEDULER_TICK": "5s",
		},
		ServiceEnv: map[harness.Service]map[string]string{
			harness.Orchestrator: orchestratorEnv(o.orchestrator),
			harness.Webhook: {
				"SVC_WEBHOOK_STANDARD_SECRET": whSecret, "SVC_WEBHOOK_STANDARD_ORG": s.slug, "SVC_WEBHOOK_STANDARD_WORKFLOW": hookWF,
			},
		},
	})
	// The cuts: each is a proxy the named side reaches its peer through.
	s.cuts["gateway→run-orchestrator"] = s.sys.ProxyPeer(t, harness.Gateway, harness.Orchestrator)
	s.cuts["gateway→identity"] = s.sys.ProxyPeer(t, harness.Gateway, harness.Identity)
	s.cuts["scheduler→run-orchestrator"] = s.sys.ProxyPeer(t, harness.Scheduler, harness.Orchestrator)
	s.cuts["webhook-ingress→run-orchestrator"] = s.sys.ProxyPeer(t, harness.Webhook, harness.Orchestrator)
	s.cuts["run-orchestrator-1→postgres"] = s.sys.ProxyDatabase(t, harness.Orchestrator)
	s.sys.StartAll(t)
	for _, svc := range []harness.Service{harness.Gateway, harness.Identity, harness.Editor, harness.Scheduler, harness.Webhook} {
		s.procs[string(svc)] = s.sys.Live(svc)[0]
	}
	s.procs[roleOrch1] = s.sys.Live(harness.Orchestrator)[0]
	// The second replica works the same queue straight on Postgres (nobody calls it over HTTP).
	s.procs[roleOrch2] = s.sys.Run(t, harness.Orchestrator, map[string]string{
		"SVC_ORCHESTRATOR_ADDR": freeAddr(t), "SVC_DATABASE_URL": dbURL,
	})

	var err error
	s.db, err = pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(s.db.Close)

	s.api = newAPI(s.sys.BaseURL, origin, s.rec)
	s.signUp()
	s.workflows()
	return s
}

// orchestratorEnv is the run-orchestrator replicas' settings: the sink is on 127.0.0.1, and
// http.request refuses private addresses unless allowed; then extra.
func orchestratorEnv(extra map[string]string) map[string]string {
	env := map[string]string{"SVC_HTTP_ALLOW_PRIVATE": "1"}
	maps.Copy(env, extra)
	return env
}

func (s *stack) proc(role string) *harness.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[role]
}

func (s *stack) roles() []string {
	return []string{string(harness.Gateway), string(harness.Identity), string(harness.Editor), roleOrch1, roleOrch2,
		string(harness.Scheduler), string(harness.Webhook)}
}

// killRestart is kill -9 of role's process, a pause of hold, and a restart on its address.
func (s *stack) killRestart(role string, hold time.Duration) {
	s.t.Helper()
	p := s.proc(role)
	p.Kill(s.t)
	time.Sleep(hold) // holds the fault window open
	np := s.sys.Restart(s.t, p)
	s.mu.Lock()
	s.procs[role] = np
	s.mu.Unlock()
}

// setupCtx bounds the set-up requests.
func setupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (s *stack) must(r reply, want int, what string) reply {
	s.t.Helper()
	if r.status != want {
		s.t.Fatalf("%s: want %d, got %d %v: %s", what, want, r.status, r.err, r.raw)
	}
	return r
}

// signUp makes the suite's user and its organization with the slug webhook-ingress expects.
func (s *stack) signUp() {
	t := s.t
	ctx := setupCtx(t)
	email := "chaos-" + randHex(6) + "@example.com"
	r := s.must(s.api.call(ctx, "setup", "POST", "/api/auth/sign-up/email",
		map[string]any{"email": email, "password": "correct horse battery", "name": "chaos"}, false), 200, "sign-up")
	s.api.token = r.str("token")
	s.must(s.api.call(ctx, "setup", "POST", "/api/auth/organization/create", map[string]any{"name": "Chaos", "slug": s.slug}, true), 200, "create organization")
}

func block(id, typ string, params map[string]any) map[string]any {
	return map[string]any{"block_id": id, "type": typ, "params": params}
}

// sinkStep is an http.request to the sink that names its run and block; ms is how long the
// sink takes to answer.
func (s *stack) sinkStep(id string, ms int) map[string]any {
	return block(id, "http.request", map[string]any{
		"method": "GET", "url": s.sink.url + "/sink?run={{ run.id }}&block=" + id + "&ms=" + strconv.Itoa(ms), "timeout_ms": 15000,
	})
}

func line(blocks ...map[string]any) map[string]any {
	edges := []any{}
	for i := 1; i < len(blocks); i++ {
		edges = append(edges, map[string]any{"block_id": blocks[i-1]["block_id"], "target_block_id": blocks[i]["block_id"]})
	}
	bs := make([]any, len(blocks))
	for i, b := range blocks {
		bs[i] = b
	}
	return map[string]any{"blocks": bs, "edges": edges}
}

// sinkBlocks are the blocks of each kind that call the sink (once each when the run completes).
var sinkBlocks = map[string][]string{ //nolint:gochecknoglobals // fixed table
	"chain": {"s1", "s2", "s3"}, "sleep": {"s1"}, "signal": {"s1"}, "hold": {"s1"}, "slow": {"s1", "s2", "s3"},
	"tick": {"s1"}, "hook": {"s1"},
}

func (s *stack) workflows() {
	t := s.t
	ctx := setupCtx(t)
	manual := block("start", "trigger.manual", map[string]any{})
	defs := map[string]map[string]any{
		"chain":  line(manual, s.sinkStep("s1", 40), s.sinkStep("s2", 40), s.sinkStep("s3", 40)),
		"sleep":  line(manual, block("nap", "wait", map[string]any{"duration": "2s"}), s.sinkStep("s1", 20)),
		"signal": line(manual, block("gate", "wait", map[string]any{"signal": "go"}), s.sinkStep("s1", 20)),
		"hold":   line(manual, block("hold", "wait", map[string]any{"signal": "never"}), s.sinkStep("s1", 20)),
		"slow":   line(manual, s.sinkStep("s1", 400), s.sinkStep("s2", 400), s.sinkStep("s3", 400)),
		"tick":   line(block("start", "trigger.schedule", map[string]any{}), s.sinkStep("s1", 20)),
		"hook":   line(block("start", "trigger.webhook", map[string]any{}), s.sinkStep("s1", 20)),
	}
	for kind, def := range defs {
		name := "chaos-" + kind
		if kind == "hook" {
			name = hookWF
		}
		r := s.must(s.api.call(ctx, "setup", "POST", "/api/workflows", map[string]any{"name": name, "definition": def}, true), 201, "create workflow "+kind)
		if errs, _ := r.body["validation_errors"].([]any); len(errs) > 0 {
			t.Fatalf("workflow %s: %s", kind, r.raw)
		}
		s.wf[kind] = r.str("id")
	}
}

// sink is the HTTP server the workflows' http.request steps call: it counts each (run, block).
type sink struct {
	url  string
	mu   sync.Mutex
	seen map[string]int // "run/block" → calls
}

func newSink(t *testing.T) *sink {
	k := &sink{seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		key := q.Get("run") + "/" + q.Get("block")
		k.mu.Lock()
		k.seen[key]++
		k.mu.Unlock()
		if ms, _ := strconv.Atoi(q.Get("ms")); ms > 0 {
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"key":%q}`, key)
	}))
	t.Cleanup(srv.Close)
	k.url = srv.URL
	return k
}

func (k *sink) counts() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int, len(k.seen))
	for key, n := range k.seen {
		out[key] = n
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func splitKey(key string) (run, block string) {
	run, block, _ = strings.Cut(key, "/")
	return run, block
}
