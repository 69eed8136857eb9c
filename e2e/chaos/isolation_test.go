package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/e2e/harness"
)

// isoPlan sizes one isolation run: short inside make test, longer with SVC_ISOLATION_DURATION.
type isoPlan struct {
	// workers of the one run-orchestrator replica: twenty is the fewest whose default ceiling
	// per organization (all but one in twenty) keeps 95 % for one organization alone, as it does
	// with the 100 of production.
	workers    int
	hold       time.Duration // the least a phase lasts, for B's samples
	settle     time.Duration // how long A's runs of a phase may take to end
	floodRuns  int           // runs of the fan-out flood
	fanOut     int           // http.request blocks per flood run
	slowMS     int           // how long the flood's endpoint takes to answer
	memBombs   int           // runs of the memory bomb
	cpuBombs   int           // runs of the CPU bomb
	cpuN       int           // the CPU bomb's input list: reduce over reduce is cpuN² steps
	bigRuns    int           // runs of each huge-output workflow
	streams    int           // the gateway's cap of open streams per principal
	keys       int           // API keys A makes (fewer if a ceiling says no)
	runsPerKey int           // runs each key starts at once
}

// isoPlanFor is the short run for d == 0, else a run of about d: the phases share d, the
// flood is the 40 runs × 60 calls on a 300 ms endpoint.
func isoPlanFor(d time.Duration) isoPlan {
	p := isoPlan{
		workers: 20, hold: 6 * time.Second, settle: 90 * time.Second,
		floodRuns: 8, fanOut: 60, slowMS: 300,
		memBombs: 2, cpuBombs: 2, cpuN: 12000, bigRuns: 3,
		streams: 20, keys: 20, runsPerKey: 1,
	}
	if d > 0 {
		p.hold = max(d/9, 20*time.Second)
		p.settle = 5 * time.Minute
		p.floodRuns, p.fanOut = 40, 60
		p.memBombs, p.cpuBombs, p.bigRuns = 6, 6, 10
		p.keys, p.runsPerKey = 110, 3 // past identity's 100 keys per organization
	}
	return p
}

// Phase names.
const (
	phAAlone  = "A alone: fan-out flood"
	phWarm    = "B warms up"
	phBAlone  = "B alone"
	phFlood   = "fan-out flood"
	phMem     = "expression bomb (memory)"
	phCPU     = "expression bomb (CPU)"
	phBig     = "huge outputs"
	phStreams = "open streams to the cap"
	phKeys    = "many API keys"
	phAll     = "all at once"
)

// TestIsolation is the noisy-neighbour run (docs/RELIABILITY.md, "Isolation between
// organizations"): organization B runs a steady light workload (one-step http.request runs, a
// run that waits for a signal B sends, and an open event stream of its runs) while organization
// A, within its limits, floods the workers with fan-outs on a slow endpoint, sends expression
// bombs (memory, CPU) in its run input, makes huge outputs, opens event streams up to the cap
// and makes many API keys that all start runs, one after the other and then all at once.
//
// Each phase passes on invariants: none of B's runs fails; B's stream misses none of its
// completed runs (it stays open until their events arrived); no process exited (a crashed one is restarted, so the next phases
// still measure); no 5xx at all (no fault is injected); every run A started ended (failed with
// an error code where a bound was hit). Before B starts, A's flood alone must keep every worker
// it may hold busy, with its throughput beside the workers' capacity. B's start → completed
// p99 within 2× of B alone or B alone + 100 ms, whichever is larger, is reported, met or
// missed, never failed: a timing. The table goes to the log, and to SVC_ISOLATION_REPORT
// (markdown) when set.
//
// SVC_ISOLATION_DURATION (make isolation) sets the run's length and the flood size;
// unset (make test), a short run of about 90 s.
func TestIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("isolation: starts the whole system on private servers")
	}
	var long time.Duration
	if v := os.Getenv("SVC_ISOLATION_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SVC_ISOLATION_DURATION=%q: want a positive duration such as 5m", v)
		}
		long = d
	}
	// SVC_ISOLATION_PHASE, when set, runs only the noisy phases whose name holds it (after A
	// alone and B alone): a quicker look at one of them.
	only := os.Getenv("SVC_ISOLATION_PHASE")
	plan := isoPlanFor(long)
	t0 := time.Now()
	built := commit()
	iso := setupIsolation(t, plan)
	t.Logf("set-up (build, private servers, system, tenants, workflows) took %s", time.Since(t0).Round(time.Second))

	bg, cancelBG := context.WithCancel(context.Background())
	t.Cleanup(cancelBG)
	stopWatch := iso.watch(bg)
	t.Cleanup(stopWatch) // before the harness stops the processes: a stop is no crash

	// A alone first: every worker used, and the throughput that the fair sharing must keep.
	alone := iso.phase(bg, phAAlone, func(ctx context.Context, ph *isoPhase) {
		iso.ep.resetPeak()
		iso.flood(ctx, ph, plan.floodRuns)
	}, false)
	alone.peak = iso.ep.peak.Load() // B calls no slow endpoint: this is A's alone

	quietCtx, stopQuiet := context.WithCancel(bg)
	quietDone, closeStream := iso.quiet(quietCtx, bg)
	// B's first runs open connections and fill caches: not the baseline.
	warm := iso.phase(bg, phWarm, nil, false)
	phases := []*isoPhase{alone, warm}
	phases = append(phases, iso.phase(bg, phBAlone, nil, true))
	noisy := []struct {
		name string
		act  func(context.Context, *isoPhase)
	}{
		{phFlood, func(ctx context.Context, ph *isoPhase) { iso.flood(ctx, ph, plan.floodRuns) }},
		{phMem, iso.memBombs},
		{phCPU, iso.cpuBombs},
		{phBig, iso.bigOutputs},
		{phStreams, iso.streamsToCap},
		{phKeys, iso.manyKeys},
		{phAll, func(ctx context.Context, ph *isoPhase) {
			var wg sync.WaitGroup
			for _, f := range []func(context.Context, *isoPhase){
				func(ctx context.Context, ph *isoPhase) { iso.flood(ctx, ph, plan.floodRuns) },
				iso.memBombs, iso.cpuBombs, iso.bigOutputs, iso.streamsToCap, iso.manyKeys,
			} {
				wg.Add(1)
				go func() { defer wg.Done(); f(ctx, ph) }()
			}
			wg.Wait()
		}},
	}
	for _, n := range noisy {
		if only == "" || strings.Contains(n.name, only) {
			phases = append(phases, iso.phase(bg, n.name, n.act, true))
		}
	}
	stopQuiet()
	quietDone()
	stopWatch()
	// B's stream, still open, gets a moment to deliver the last runs' events.
	iso.streamSettled(bg, 10*time.Second)
	closeStream()

	v := iso.judge(phases)
	v.figures = append([][2]string{
		{"date, commit", time.Now().UTC().Format("2006-01-02 15:04 UTC") + ", " + built},
		{"plan", fmt.Sprintf("1 run-orchestrator replica × %d workers; flood %d runs × %d calls of %d ms; phases ≥ %s",
			plan.workers, plan.floodRuns, plan.fanOut, plan.slowMS, plan.hold)},
	}, v.figures...)
	title := "Tenant isolation run (" + time.Since(t0).Round(time.Second).String() + ")"
	v.publish(t, iso.markdown(title, v), "SVC_ISOLATION_REPORT")
}

// isolation is the system, the two tenants and what the run saw.
type isolation struct {
	t       *testing.T
	plan    isoPlan
	sys     *harness.System
	db      *pgxpool.Pool // the system's database: where a slow run's job stood in the queue
	ep      *endpoint
	a, b    *tenant
	recA    *recorder
	recB    *recorder
	cur     guarded[*isoPhase]
	samples guarded[[]quietSample]
	// seen is when B's stream delivered each of B's runs' completed status; statuses, every
	// status it delivered of each run (to tell a missed event from a missed run).
	seen     guarded[map[string]time.Time]
	statuses guarded[map[string][]string]
	drops    guarded[[]time.Time] // when B's stream ended unasked
	restarts guarded[[]restart]
	rows     []phaseRow // the table, once judged
}

// isoPhase is one phase: its window, A's runs and what A hit.
type isoPhase struct {
	name       string
	withB      bool
	start, end time.Time
	runs       guarded[[]noisyRun]
	bounds     guarded[map[string]int] // "what: status code" → count, for limits A hit at the edge
	peak       int64                   // calls in flight at the flood's endpoint (A alone)
	floodSteps int                     // calls the flood made, for the throughput
	floodStart time.Time
}

// noisyRun is one run A started and how it ended.
type noisyRun struct {
	id, kind string
	end      runState
	code     string // the failed attempt's error code
}

// quietSample is one of B's runs.
type quietSample struct {
	kind     string // "one-step" or "signal"
	id       string
	sent     time.Time // the start (one-step) or the signal (signal) request was sent
	answered time.Time // its 202 came back
	finished time.Time
	status   string
	phase    *isoPhase
	queue    string // for a slow run: where its job stood in the queue, read when it ended
}

// restart is a process that exited during the run.
type restart struct {
	at    time.Time
	svc   harness.Service
	phase string
	err   string
	tail  string
}

func setupIsolation(t *testing.T, plan isoPlan) *isolation {
	t.Helper()
	pg := harness.StartPostgres(t)
	rd := harness.StartRedis(t)
	iso := &isolation{t: t, plan: plan, ep: newEndpoint(t), recA: &recorder{}, recB: &recorder{}}
	iso.seen.v = map[string]time.Time{}
	iso.statuses.v = map[string][]string{}
	dbURL := pg.NewDatabase(t)
	db, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("isolation: database: %v", err)
	}
	t.Cleanup(db.Close)
	iso.db = db
	iso.sys = harness.New(t, harness.Options{
		DatabaseURL: dbURL,
		RedisURL:    rd.URL,
		Env: map[string]string{
			"SVC_TRUSTED_ORIGINS": origin,
			"SVC_LOG_LEVEL":       "warn",
			// A stays within its limits; the per-principal bucket is set high so that the
			// flood's polling is not what limits A (a 429 is waited out either way).
			"SVC_RATE_LIMIT_PER_MINUTE": "100000",
			"SVC_GATEWAY_MAX_STREAMS":   fmt.Sprint(plan.streams),
		},
		ServiceEnv: map[harness.Service]map[string]string{
			// The endpoint is on 127.0.0.1: http.request refuses private addresses unless allowed.
			harness.Orchestrator: {"SVC_HTTP_ALLOW_PRIVATE": "1", "SVC_ORCHESTRATOR_WORKERS": fmt.Sprint(plan.workers)},
		},
	})
	iso.sys.StartAll(t)
	iso.a = newTenant(t, iso.sys.BaseURL, "noisy", iso.recA)
	iso.b = newTenant(t, iso.sys.BaseURL, "quiet", iso.recB)

	ep := iso.ep
	manual := block("start", "trigger.manual", map[string]any{})
	iso.b.workflow(t, "one", graph([]map[string]any{manual, ep.step("call", "/fast")}, [2]string{"start", "call"}))
	iso.b.workflow(t, "signal", graph([]map[string]any{manual, block("gate", "wait", map[string]any{"signal": "go"}), ep.step("call", "/fast")},
		[2]string{"start", "gate"}, [2]string{"gate", "call"}))

	flood := []map[string]any{manual}
	var edges [][2]string
	for i := range plan.fanOut {
		id := fmt.Sprintf("call%02d", i)
		flood = append(flood, ep.step(id, fmt.Sprintf("/slow?ms=%d", plan.slowMS)))
		edges = append(edges, [2]string{"start", id})
	}
	iso.a.workflow(t, "flood", graph(flood, edges...))
	iso.a.workflow(t, "one", graph([]map[string]any{manual, ep.step("call", fmt.Sprintf("/slow?ms=%d", plan.slowMS))}, [2]string{"start", "call"}))
	// The bombs hide their sizes in the run input, where no check at save time can see them.
	iso.a.workflow(t, "mem", graph([]map[string]any{manual,
		block("bomb", "transform", map[string]any{"value": "{{ repeat(repeat('a', input.n), input.m) }}"})}, [2]string{"start", "bomb"}))
	iso.a.workflow(t, "cpu", graph([]map[string]any{manual,
		block("bomb", "transform", map[string]any{"value": "{{ reduce(input.a, reduce(input.a, #acc + 1, 0), 0) }}"})}, [2]string{"start", "bomb"}))
	// Three outputs of 900 KiB each, under the 1 MiB bound, joined into one of 2.7 MB.
	iso.a.workflow(t, "join", graph([]map[string]any{manual,
		ep.step("b1", "/big?kb=900"), ep.step("b2", "/big?kb=900"), ep.step("b3", "/big?kb=900"),
		block("join", "transform", map[string]any{"value": "{{ steps.b1.output.body.pad + steps.b2.output.body.pad + steps.b3.output.body.pad }}"}),
	}, [2]string{"start", "b1"}, [2]string{"start", "b2"}, [2]string{"start", "b3"},
		[2]string{"b1", "join"}, [2]string{"b2", "join"}, [2]string{"b3", "join"}))
	// A response past the stored 1 MiB: the body is cut there, and the output is over it.
	iso.a.workflow(t, "big", graph([]map[string]any{manual, ep.step("call", "/big?kb=1100")}, [2]string{"start", "call"}))
	return iso
}

// phase runs act as A (nil: A does nothing) and lasts at least plan.hold, until A's runs of
// the phase ended (or plan.settle passed); withB marks the phases B's figures are taken in.
func (iso *isolation) phase(bg context.Context, name string, act func(context.Context, *isoPhase), withB bool) *isoPhase {
	ph := &isoPhase{name: name, withB: withB, start: time.Now()}
	ph.bounds.v = map[string]int{}
	iso.cur.with(func(p **isoPhase) { *p = ph })
	iso.t.Logf("phase: %s", name)
	ctx, cancel := context.WithTimeout(bg, iso.plan.hold) // what A holds (streams) it holds this long
	defer cancel()
	if act != nil {
		act(ctx, ph)
	}
	<-ctx.Done()
	deadline := ph.start.Add(iso.plan.settle)
	var runs []noisyRun
	ph.runs.with(func(v *[]noisyRun) { runs = *v })
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := &runs[i]
			r.end = iso.a.waitEnd(bg, r.id, deadline, 250*time.Millisecond)
			if r.end.status == "failed" {
				r.code = iso.a.failureCode(bg, r.id)
			}
		}()
	}
	wg.Wait()
	ph.runs.with(func(v *[]noisyRun) { *v = runs })
	ph.end = time.Now()
	return ph
}

// note records a limit A hit at the edge (a 4xx it was given).
func (ph *isoPhase) note(what string, r reply) {
	if r.status == 0 {
		r.err = nil // the counts group by what happened, not by the error's details
	}
	ph.bounds.with(func(m *map[string]int) { (*m)[what+": "+answer(r)]++ })
}

// started records a run A started, or the answer that started none.
func (ph *isoPhase) started(kind string, r reply) {
	if r.status == http.StatusAccepted && r.str("runId") != "" {
		ph.runs.with(func(v *[]noisyRun) { *v = append(*v, noisyRun{id: r.str("runId"), kind: kind}) })
		return
	}
	ph.note("start "+kind, r)
}

// startMany starts n runs of kind at once (eight requests in flight).
func (iso *isolation) startMany(ctx context.Context, ph *isoPhase, kind string, n int, input func(i int) map[string]any) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	deadline := time.Now().Add(iso.plan.settle / 2)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ph.started(kind, iso.a.start(context.WithoutCancel(ctx), deadline, kind, "", input(i)))
		}()
	}
	wg.Wait()
}

// flood starts n fan-out runs of plan.fanOut slow calls each.
func (iso *isolation) flood(ctx context.Context, ph *isoPhase, n int) {
	ph.floodStart = time.Now()
	ph.floodSteps += n * iso.plan.fanOut
	iso.startMany(ctx, ph, "flood", n, func(int) map[string]any { return map[string]any{} })
}

// memBombs: repeat(repeat('a', 999999), 100000) asks for 100 GB in one builtin call.
func (iso *isolation) memBombs(ctx context.Context, ph *isoPhase) {
	iso.startMany(ctx, ph, "mem", iso.plan.memBombs, func(int) map[string]any { return map[string]any{"n": 999999, "m": 100000} })
}

// cpuBombs: reduce over reduce of a list of cpuN numbers, cpuN² steps of the evaluator.
func (iso *isolation) cpuBombs(ctx context.Context, ph *isoPhase) {
	list := make([]int, iso.plan.cpuN)
	iso.startMany(ctx, ph, "cpu", iso.plan.cpuBombs, func(int) map[string]any { return map[string]any{"a": list} })
}

// bigOutputs: runs whose outputs are huge, joined in a transform or cut at the response bound.
func (iso *isolation) bigOutputs(ctx context.Context, ph *isoPhase) {
	iso.startMany(ctx, ph, "join", iso.plan.bigRuns, func(int) map[string]any { return map[string]any{} })
	iso.startMany(ctx, ph, "big", iso.plan.bigRuns, func(int) map[string]any { return map[string]any{} })
}

// streamsToCap opens A's organization stream up to the cap (and one more, which must be
// refused with a 4xx), reads them while a small flood makes events, and holds them until ctx
// ends.
func (iso *isolation) streamsToCap(ctx context.Context, ph *isoPhase) {
	var open []*sse
	for range iso.plan.streams + 1 {
		s := iso.a.openSSE(ctx, "/api/runs/events", "", func(string, string) {})
		if s.status != http.StatusOK {
			r := reply{status: s.status}
			_ = json.Unmarshal([]byte(s.body), &r.body)
			ph.note("stream", r)
			break
		}
		open = append(open, s)
	}
	ph.bounds.with(func(m *map[string]int) { (*m)["streams open"] += len(open) })
	iso.flood(ctx, ph, max(1, iso.plan.floodRuns/4))
	<-ctx.Done()
	for _, s := range open {
		<-s.done
	}
}

// manyKeys makes API keys until plan.keys or a ceiling says no, then every key starts runs at
// once: many principals, each with a rate-limit bucket of its own.
func (iso *isolation) manyKeys(ctx context.Context, ph *isoPhase) {
	var keys []string
	for i := range iso.plan.keys {
		r := iso.a.api.retry(context.WithoutCancel(ctx), time.Now().Add(30*time.Second), "key.create", "POST", "/api/auth/api-key/create",
			map[string]any{"name": fmt.Sprintf("noisy-%d-%s", i, randHex(3))}, true)
		if r.status != http.StatusOK || r.str("key") == "" {
			ph.note("api-key create", r)
			break
		}
		keys = append(keys, r.str("key"))
	}
	ph.bounds.with(func(m *map[string]int) { (*m)["api keys made"] += len(keys) })
	var wg sync.WaitGroup
	deadline := time.Now().Add(iso.plan.settle / 2)
	for _, k := range keys {
		for range iso.plan.runsPerKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ph.started("one", iso.a.start(context.WithoutCancel(ctx), deadline, "one", k, map[string]any{}))
			}()
		}
	}
	wg.Wait()
}

// quiet starts B's steady light workload until ctx ends: two loops of one-step runs, one loop
// of signal runs; and B's organization stream, which must deliver every completed status, until
// streamCtx ends (after the last runs' events). wait waits for the loops; closeStream closes the
// stream and waits for it.
func (iso *isolation) quiet(ctx, streamCtx context.Context) (wait, closeStream func()) {
	streamCtx, cancelStream := context.WithCancel(streamCtx)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for streamCtx.Err() == nil {
			s := iso.b.openSSE(streamCtx, "/api/runs/events", "", func(kind, data string) {
				var ev struct {
					RunID  string `json:"runId"`
					Status string `json:"status"`
				}
				if kind != "run.status" || json.Unmarshal([]byte(data), &ev) != nil {
					return
				}
				iso.statuses.with(func(m *map[string][]string) { (*m)[ev.RunID] = append((*m)[ev.RunID], ev.Status) })
				if ev.Status == "completed" {
					iso.seen.with(func(m *map[string]time.Time) {
						if _, ok := (*m)[ev.RunID]; !ok {
							(*m)[ev.RunID] = time.Now()
						}
					})
				}
			})
			<-s.done
			if streamCtx.Err() == nil {
				iso.drops.with(func(v *[]time.Time) { *v = append(*v, time.Now()) })
				time.Sleep(200 * time.Millisecond) // reconnect pace
			}
		}
	}()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				iso.quietOne(ctx)
				time.Sleep(100 * time.Millisecond) // B's pace: a light workload
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			iso.quietSignal(ctx)
			time.Sleep(300 * time.Millisecond) // B's pace
		}
	}()
	return wg.Wait, func() { cancelStream(); <-streamDone }
}

func (iso *isolation) phaseNow() *isoPhase {
	var ph *isoPhase
	iso.cur.with(func(p **isoPhase) { ph = *p })
	return ph
}

// finish waits for B's run to end (a minute at most: past it the run counts as not completed)
// and records it.
func (iso *isolation) finish(ctx context.Context, kind, id string, sent time.Time, ph *isoPhase) {
	answered := time.Now()
	st := iso.b.waitEnd(context.WithoutCancel(ctx), id, time.Now().Add(time.Minute), 20*time.Millisecond)
	var queue string
	if st.finished.Sub(sent) > slowRun {
		// Now, while River still keeps the finished jobs (a few minutes).
		queue = iso.queueTrace(context.WithoutCancel(ctx), id)
	}
	iso.samples.with(func(v *[]quietSample) {
		*v = append(*v, quietSample{kind: kind, id: id, sent: sent, answered: answered, finished: st.finished, status: st.status, phase: ph, queue: queue})
	})
}

// slowRun is how long a run of B's takes before the suite reads where its job stood in the
// queue.
const slowRun = 500 * time.Millisecond

// queueTrace says where the first job of B's run stood in River's queue: its tag
// (scheduled_at), when it was inserted and taken, its tries, and the jobs workers took
// between the two, split by whether their tags were before B's (served in order; "late" when
// they were inserted after B's) or after it (taken out of order).
func (iso *isolation) queueTrace(ctx context.Context, runID string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var (
		tag, created, taken                 time.Time
		tries                               int
		meta                                string
		before, beforeLate, after, ownAfter int64
		lowTag, lastCreated, highTag        time.Time
	)
	err := iso.db.QueryRow(ctx, `WITH b AS (
			SELECT id, scheduled_at, created_at, attempted_at, attempt, metadata::text AS meta, args->>'org' AS org
			FROM orchestrator.river_job WHERE args @> jsonb_build_object('run_id', $1::text) ORDER BY id LIMIT 1)
		SELECT b.scheduled_at, b.created_at, coalesce(b.attempted_at, b.created_at), b.attempt, b.meta,
			count(*) FILTER (WHERE j.scheduled_at < b.scheduled_at),
			count(*) FILTER (WHERE j.scheduled_at < b.scheduled_at AND j.created_at > b.created_at),
			count(*) FILTER (WHERE j.scheduled_at >= b.scheduled_at),
			count(*) FILTER (WHERE j.scheduled_at >= b.scheduled_at AND j.args->>'org' = b.org),
			coalesce(min(j.scheduled_at) FILTER (WHERE j.scheduled_at < b.scheduled_at), b.scheduled_at),
			coalesce(max(j.created_at) FILTER (WHERE j.scheduled_at < b.scheduled_at), b.created_at),
			coalesce(max(j.scheduled_at) FILTER (WHERE j.scheduled_at < b.scheduled_at), b.scheduled_at)
		FROM b LEFT JOIN orchestrator.river_job j ON j.id <> b.id AND j.attempted_at > b.created_at AND j.attempted_at < b.attempted_at
		GROUP BY b.id, b.scheduled_at, b.created_at, b.attempted_at, b.attempt, b.meta, b.org`, runID).
		Scan(&tag, &created, &taken, &tries, &meta, &before, &beforeLate, &after, &ownAfter, &lowTag, &lastCreated, &highTag)
	if err != nil {
		return "queue: " + err.Error()
	}
	return fmt.Sprintf("job tagged %s, inserted %s, taken %s (+%d ms, try %d, metadata %s); taken between: %d tagged before it (%d inserted after it; tags %s to %s, the last inserted %s), %d after it (%d its own organization's)",
		tag.Format("15:04:05.000000"), created.Format("15:04:05.000"), taken.Format("15:04:05.000"), taken.Sub(created).Milliseconds(),
		tries, meta, before, beforeLate, lowTag.Format("15:04:05.000000"), highTag.Format("15:04:05.000000"), lastCreated.Format("15:04:05.000"),
		after, ownAfter)
}

// anatomy says where the time of B's one-step run went: the start's answer, the wait for a
// worker (the run's createdAt to its step's startedAt), the step, and the run's end.
func (iso *isolation) anatomy(ctx context.Context, q quietSample) string {
	at := func(m map[string]any, k string) time.Time {
		s, _ := m[k].(string)
		v, _ := time.Parse(time.RFC3339Nano, s)
		return v
	}
	r := iso.b.api.call(ctx, "run.get", "GET", "/api/runs/"+q.id, nil, true)
	l := iso.b.api.call(ctx, "run.logs", "GET", "/api/runs/"+q.id+"/logs", nil, true)
	if r.status != http.StatusOK || l.status != http.StatusOK {
		return q.id + ": " + answer(r) + ", logs " + answer(l)
	}
	var step map[string]any
	items, _ := l.body["items"].([]any)
	for _, it := range items {
		if m, _ := it.(map[string]any); m["block_id"] == "call" {
			step = m
		}
	}
	created, started, ended := at(r.body, "createdAt"), at(step, "startedAt"), at(step, "finishedAt")
	return fmt.Sprintf("%s %d ms: answered in %d, created +%d, waited %d for a worker, step %d, run ended %d after",
		q.id, q.finished.Sub(q.sent).Milliseconds(), q.answered.Sub(q.sent).Milliseconds(), created.Sub(q.sent).Milliseconds(),
		started.Sub(created).Milliseconds(), ended.Sub(started).Milliseconds(), q.finished.Sub(ended).Milliseconds())
}

func (iso *isolation) quietOne(ctx context.Context) {
	ph := iso.phaseNow()
	sent := time.Now()
	r := iso.b.start(ctx, time.Now().Add(30*time.Second), "one", "", map[string]any{})
	if r.status != http.StatusAccepted {
		if ctx.Err() == nil {
			iso.samples.with(func(v *[]quietSample) {
				*v = append(*v, quietSample{kind: "one-step", sent: sent, status: "start " + answer(r), phase: ph})
			})
		}
		return
	}
	iso.finish(ctx, "one-step", r.str("runId"), sent, ph)
}

func (iso *isolation) quietSignal(ctx context.Context) {
	r := iso.b.start(ctx, time.Now().Add(30*time.Second), "signal", "", map[string]any{})
	if r.status != http.StatusAccepted {
		return // counted by the 5xx check if it was one
	}
	id := r.str("runId")
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		g := iso.b.api.call(context.WithoutCancel(ctx), "run.get", "GET", "/api/runs/"+id, nil, true)
		if g.status == http.StatusOK && waitingAt("gate")(g.body) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling pace
	}
	ph := iso.phaseNow()
	sent := time.Now()
	s := iso.b.api.retry(context.WithoutCancel(ctx), time.Now().Add(30*time.Second), "run.signal", "POST", "/api/runs/"+id+"/signals",
		map[string]any{"name": "go"}, true)
	if s.status != http.StatusAccepted {
		iso.samples.with(func(v *[]quietSample) {
			*v = append(*v, quietSample{kind: "signal", id: id, sent: sent, status: "signal " + answer(s), phase: ph})
		})
		return
	}
	iso.finish(ctx, "signal", id, sent, ph)
}

// streamSettled waits until B's stream has delivered every completed run B saw, or within.
func (iso *isolation) streamSettled(ctx context.Context, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		missing := 0
		var qs []quietSample
		iso.samples.with(func(v *[]quietSample) { qs = *v })
		iso.seen.with(func(m *map[string]time.Time) {
			for _, q := range qs {
				if _, ok := (*m)[q.id]; q.status == "completed" && !ok {
					missing++
				}
			}
		})
		if missing == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling pace
	}
}

// watch restarts, as a supervisor would, any process that exits, and records it against the
// phase under way; the returned func stops the watch (and is safe to call twice).
func (iso *isolation) watch(bg context.Context) func() {
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	seen := map[*harness.Process]bool{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, svc := range []harness.Service{harness.Gateway, harness.Identity, harness.Editor, harness.Orchestrator, harness.Scheduler, harness.Webhook} {
				for _, p := range iso.sys.Processes(svc) {
					exited, err := p.Exited()
					if !exited || seen[p] || ctx.Err() != nil {
						continue
					}
					seen[p] = true
					name := ""
					if ph := iso.phaseNow(); ph != nil {
						name = ph.name
					}
					out := p.Output()
					iso.restarts.with(func(v *[]restart) {
						*v = append(*v, restart{at: time.Now(), svc: svc, phase: name, err: fmt.Sprint(err), tail: out[max(0, len(out)-2000):]})
					})
					iso.sys.Restart(iso.t, p)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // the watch's pace
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// phaseRow is one line of the table.
type phaseRow struct {
	ph                       *isoPhase
	bRuns, bBad              int
	p50, p99, sigP50, sigP99 time.Duration
	streamMissing            int
	over                     int    // B's one-step runs over the bound
	slowest                  string // where the time of B's slowest one-step run went
	streamP99                time.Duration
	fiveXX                   int
	restarts                 int
	aEnded, aRuns            int
	aOutcomes                string
	bound                    time.Duration
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

// judge checks every phase's invariants and makes the table's rows.
func (iso *isolation) judge(phases []*isoPhase) *verdict {
	v := &verdict{}
	cLat := v.check("B's p99 start → completed within max(2× alone, alone + 100 ms)")
	cLat.timing = true
	cB := v.check("B's runs completed")
	// B's organization stream is best effort (no ids, no resume), and a rare run is missed
	// (about one in a few thousand, a bug not yet found: see docs/RELIABILITY.md): a miss is
	// counted and printed, and the run fails when the stream misses more than one run in a
	// hundred, as a broken stream would.
	cStream := v.check("B's completed runs seen on B's organization stream")
	missing := 0
	cRestart := v.check("no process exited")
	c5xx := v.check("no 5xx, every request answered")
	cA := v.check("A's runs all ended, failures with an error code")
	cWorkers := v.check("A alone keeps every worker it may hold busy")

	var qs []quietSample
	iso.samples.with(func(x *[]quietSample) { qs = *x })
	var seen map[string]time.Time
	iso.seen.with(func(m *map[string]time.Time) { seen = *m })
	var statuses map[string][]string
	iso.statuses.with(func(m *map[string][]string) { statuses = *m })
	var rs []restart
	iso.restarts.with(func(x *[]restart) { rs = *x })
	outcomes := append(iso.recA.outcomes(), iso.recB.outcomes()...)

	var rows []phaseRow
	var alone time.Duration
	for _, ph := range phases {
		row := phaseRow{ph: ph}
		var lat, sig, lag []time.Duration
		for _, q := range qs {
			if q.phase != ph {
				continue
			}
			row.bRuns++
			cB.checked++
			if q.status != "completed" {
				row.bBad++
				cB.failf("%s: B's %s run %s: %s", ph.name, q.kind, q.id, q.status)
				continue
			}
			d := q.finished.Sub(q.sent)
			if q.kind == "signal" {
				sig = append(sig, d)
			} else {
				lat = append(lat, d)
			}
			cStream.checked++
			if at, ok := seen[q.id]; ok {
				lag = append(lag, at.Sub(q.finished))
			} else {
				row.streamMissing++
				missing++
				cStream.failf("%s: B's run %s completed at %s but its stream never said so (it said %v)", ph.name, q.id,
					q.finished.Format("15:04:05.000"), statuses[q.id])
			}
		}
		row.p50, row.p99 = percentile(lat, .5), percentile(lat, .99)
		var slow *quietSample
		for i, q := range qs {
			if q.phase == ph && q.kind == "one-step" && q.status == "completed" && (slow == nil || q.finished.Sub(q.sent) > slow.finished.Sub(slow.sent)) {
				slow = &qs[i]
			}
		}
		if slow != nil {
			row.slowest = iso.anatomy(context.Background(), *slow)
			if slow.queue != "" {
				row.slowest += "; " + slow.queue
			}
		}
		for _, q := range qs {
			if q.phase == ph && q.queue != "" {
				iso.t.Logf("%s: B's run %s took %d ms: %s", ph.name, q.id, q.finished.Sub(q.sent).Milliseconds(), q.queue)
			}
		}
		row.sigP50, row.sigP99 = percentile(sig, .5), percentile(sig, .99)
		row.streamP99 = percentile(lag, .99)
		if ph.name == phBAlone {
			alone = row.p99
		}
		if ph.withB && ph.name != phBAlone {
			row.bound = max(2*alone, alone+100*time.Millisecond)
			cLat.checked++
			for _, d := range lat {
				if d > row.bound {
					row.over++
				}
			}
			if len(lat) == 0 {
				cLat.failf("%s: B completed no one-step run", ph.name)
			} else if row.p99 > row.bound {
				cLat.failf("%s: B's p99 %s over %s (B alone: %s)", ph.name, row.p99.Round(time.Millisecond), row.bound.Round(time.Millisecond), alone.Round(time.Millisecond))
			}
		}
		for _, r := range rs {
			if r.phase == ph.name {
				row.restarts++
				cRestart.failf("%s: %s exited (%s): …%s", ph.name, r.svc, r.err, lastLines(r.tail, 5))
			}
		}
		cRestart.checked++
		for _, o := range outcomes {
			if o.start.Before(ph.start) || !o.start.Before(ph.end) {
				continue
			}
			c5xx.checked++
			if o.status >= 500 || o.status == 0 {
				row.fiveXX++
				if row.fiveXX <= 3 {
					c5xx.failf("%s: %s %s %s → %d %s%s", ph.name, o.op, o.method, o.path, o.status, truncate(o.body, 200), o.err)
				} else {
					c5xx.bad++
				}
			}
		}
		var runs []noisyRun
		ph.runs.with(func(x *[]noisyRun) { runs = *x })
		ends := map[string]int{}
		for _, r := range runs {
			row.aRuns++
			cA.checked++
			key := r.kind + " " + r.end.status
			switch {
			case !terminal(r.end.status):
				cA.failf("%s: A's %s run %s did not end within %s (%q)", ph.name, r.kind, r.id, iso.plan.settle, r.end.status)
				key = r.kind + " not ended"
			case r.end.status == "failed" && r.code == "":
				row.aEnded++
				cA.failf("%s: A's %s run %s failed without an error code: %s", ph.name, r.kind, r.id, truncate(r.end.message, 200))
			case r.end.status == "failed":
				row.aEnded++
				key += " (" + r.code + ")"
			default:
				row.aEnded++
			}
			ends[key]++
		}
		var bounds map[string]int
		ph.bounds.with(func(m *map[string]int) { bounds = *m })
		for k, n := range bounds {
			ends[k] += n
		}
		row.aOutcomes = joinCounts(ends)
		if ph.name == phAAlone {
			cWorkers.checked++
			if ceiling := orgCeiling(iso.plan.workers); ph.peak < int64(ceiling) {
				cWorkers.failf("A alone had at most %d calls in flight; it may hold %d of %d workers", ph.peak, ceiling, iso.plan.workers)
			}
			var last time.Time
			for _, r := range runs {
				if r.end.finished.After(last) {
					last = r.end.finished
				}
			}
			if el := last.Sub(ph.floodStart); el > 0 {
				tput := float64(ph.floodSteps) / el.Seconds()
				capacity := float64(iso.plan.workers) * 1000 / float64(iso.plan.slowMS)
				v.figures = append(v.figures, [2]string{"A alone: flood throughput",
					fmt.Sprintf("%d calls in %s: %.1f calls/s, %.0f%% of the workers' capacity (%d × 1/%d ms = %.1f/s); peak in flight %d (ceiling %d)",
						ph.floodSteps, el.Round(time.Millisecond), tput, 100*tput/capacity, iso.plan.workers, iso.plan.slowMS, capacity, ph.peak, orgCeiling(iso.plan.workers))})
			}
		}
		rows = append(rows, row)
		if row.slowest != "" {
			v.figures = append(v.figures, [2]string{"B's slowest run, " + ph.name, row.slowest})
		}
	}
	var drops []time.Time
	iso.drops.with(func(x *[]time.Time) { drops = *x })
	cB.checked++
	for _, d := range drops {
		cB.failf("B's stream ended unasked at %s", d.Format(time.TimeOnly))
	}
	v.figures = append(v.figures, [2]string{"B's completed runs missing from B's organization stream", fmt.Sprintf("%d of %d", missing, cStream.checked)})
	iso.rows = rows
	return v
}

// orgCeiling is how many of a replica's workers one organization may hold by default
// (SVC_ORCHESTRATOR_ORG_MAX_IN_FLIGHT unset): all but one in twenty, at least one spare from
// two workers on, as the orchestrator computes it.
func orgCeiling(workers int) int {
	if workers < 2 {
		return workers
	}
	return workers - max(1, workers/20)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func joinCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d", d.Milliseconds())
}

// markdown is the run's report: the invariants, the figures, and a line per phase.
func (iso *isolation) markdown(title string, v *verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n| invariant | checked | violations | result |\n|---|---:|---:|---|\n", title)
	for _, c := range v.checks {
		res, n := "pass", len(c.violations)+c.bad
		switch {
		case c.timing && n > 0:
			res = "**missed** (a timing: reported, not failed)"
		case c.timing:
			res = "met"
		case n > 0:
			res = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", c.name, c.checked, n, res)
	}
	b.WriteString("\n| figure | value |\n|---|---|\n")
	for _, f := range v.figures {
		fmt.Fprintf(&b, "| %s | %s |\n", f[0], f[1])
	}
	b.WriteString("\n| phase | length | B runs | B p50 ms | B p99 ms | bound ms | B runs over it | B signal→completed p50/p99 ms | B stream lag p99 ms, missing | B not completed | 5xx or no answer | exited | A runs ended | A's outcomes and limits hit |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range iso.rows {
		bound := "–"
		if r.bound > 0 {
			bound = ms(r.bound)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %d | %s/%s | %s, %d | %d | %d | %d | %d/%d | %s |\n",
			r.ph.name, r.ph.end.Sub(r.ph.start).Round(time.Second), r.bRuns, ms(r.p50), ms(r.p99), bound, r.over, ms(r.sigP50), ms(r.sigP99),
			ms(r.streamP99), r.streamMissing, r.bBad, r.fiveXX, r.restarts, r.aEnded, r.aRuns, r.aOutcomes)
	}
	return b.String()
}
