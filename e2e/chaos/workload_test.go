package chaos

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// trackedRun is a run the system accepted (202) and what its definition implies for its end.
type trackedRun struct {
	id      string
	kind    string // the workflow kind (stack.wf)
	want    string // "completed" or "cancelled"
	signals []string
	// signalTries counts signal requests sent, answered or not: with more than one, a signal
	// may have been stored by a request whose answer was lost.
	signalTries int
}

// patchRound is one set of concurrent patches sent with the same If-Match.
type patchRound struct {
	wf       string
	version  int
	blocks   []string // the block each patch adds
	statuses []int    // their answers (0: none)
	after    int      // the version read back afterwards
	present  []string // which of blocks the definition holds afterwards
}

// ledger is what the workload saw, for the checks.
type ledger struct {
	mu       sync.Mutex
	runs     map[string]*trackedRun
	order    []string
	hooks    map[string]map[string]bool // webhook id → run ids its 202s named
	hookBody map[string]string
	fires    map[string]map[string]bool // "schedule|cutoff" → run ids tick replies named
	patches  []patchRound
	odd      []string // answers no fault explains (an unexpected 4xx, a 202 without an id)
}

func newLedger() *ledger {
	return &ledger{runs: map[string]*trackedRun{}, hooks: map[string]map[string]bool{}, hookBody: map[string]string{},
		fires: map[string]map[string]bool{}}
}

func (l *ledger) addRun(r *trackedRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.runs[r.id]; !ok {
		l.order = append(l.order, r.id)
	}
	l.runs[r.id] = r
}

func (l *ledger) update(id string, f func(r *trackedRun)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.runs[id]; ok {
		f(r)
	}
}

func (l *ledger) oddf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.odd = append(l.odd, fmt.Sprintf(format, args...))
}

// workload drives the system through the gateway: each worker loops over the scenarios.
type workload struct {
	s        *stack
	led      *ledger
	finishBy atomic.Int64 // unix ns: a scenario under way retries until then, even after the stop
	bg       context.Context
	seq      atomic.Int64
	stats    sync.Map // scenario → *atomic.Int64
}

// scenarios and their weights.
var scenarios = []struct { //nolint:gochecknoglobals // fixed table
	name   string
	weight int
}{
	{"chain", 24}, {"sleep", 12}, {"signal", 18}, {"cancel", 10}, {"race", 10}, {"hook", 16}, {"patch", 10},
}

// start runs workers until ctx ends and then lets the scenarios under way finish; the
// returned func waits for them. A goroutine ticks the scheduler in parallel bursts.
func (w *workload) start(ctx context.Context, workers int, pace time.Duration) func() {
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			patchWF := ""
			for ctx.Err() == nil {
				name := pick(rng)
				switch name {
				case "chain":
					w.startRun("chain")
				case "sleep":
					w.startRun("sleep")
				case "signal":
					w.signal(rng)
				case "cancel":
					w.cancelWaiting()
				case "race":
					w.cancelRace(rng)
				case "hook":
					w.hook(rng)
				case "patch":
					if patchWF == "" {
						patchWF = w.patchWorkflow(i)
					}
					if patchWF != "" {
						w.patch(patchWF)
					}
				}
				w.count(name)
				select {
				case <-ctx.Done():
				case <-time.After(pace):
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			w.tick(3)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return wg.Wait
}

// deadline is how long a scenario under way keeps retrying through faults.
func (w *workload) deadline() time.Time { return time.Unix(0, w.finishBy.Load()) }

// finishWithin lets the scenarios under way retry for d more, and no longer.
func (w *workload) finishWithin(d time.Duration) { w.finishBy.Store(time.Now().Add(d).UnixNano()) }

func (w *workload) count(name string) {
	c, _ := w.stats.LoadOrStore(name, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}

func pick(rng *rand.Rand) string {
	total := 0
	for _, s := range scenarios {
		total += s.weight
	}
	n := rng.IntN(total)
	for _, s := range scenarios {
		if n < s.weight {
			return s.name
		}
		n -= s.weight
	}
	return scenarios[0].name
}

func (w *workload) api() *api { return w.s.api }

// startRun dispatches a run of kind with an idempotency key, retrying through faults with the
// same key (so a 202 lost on the way back never makes a second run), and tracks it.
func (w *workload) startRun(kind string) string {
	key := "chaos-" + randHex(8)
	r := w.api().retry(w.bg, w.deadline(), "run.start", "POST", "/api/workflows/"+w.s.wf[kind]+"/run",
		map[string]any{"input": map[string]any{"key": key}}, true, "Idempotency-Key", key)
	if r.status != http.StatusAccepted {
		if !r.retryable() && r.status < 500 {
			w.led.oddf("run.start %s: %d %s", kind, r.status, r.raw)
		}
		return ""
	}
	id := r.str("runId")
	if !strings.HasPrefix(id, "run_") {
		w.led.oddf("run.start %s: 202 without a run id: %s", kind, r.raw)
		return ""
	}
	w.led.addRun(&trackedRun{id: id, kind: kind, want: "completed"})
	return id
}

// waitFor polls the run until ok accepts it or within passes; it returns the last reading.
func (w *workload) waitFor(id string, within time.Duration, ok func(map[string]any) bool) map[string]any {
	deadline := time.Now().Add(within)
	var last map[string]any
	for time.Now().Before(deadline) && w.bg.Err() == nil {
		r := w.api().call(w.bg, "run.get", "GET", "/api/runs/"+id, nil, true)
		if r.status == http.StatusOK {
			last = r.body
			if ok(r.body) {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond) // polling pace
	}
	return last
}

func waitingAt(blockID string) func(map[string]any) bool {
	return func(run map[string]any) bool {
		wt, _ := run["waiting"].(map[string]any)
		return run["status"] == "waiting" && wt["block_id"] == blockID
	}
}

// signal starts a run that waits for signal "go" and sends it, half the time at once (it may
// arrive before the wait begins, which must not lose it) and half once the run waits.
func (w *workload) signal(rng *rand.Rand) {
	id := w.startRun("signal")
	if id == "" {
		return
	}
	if rng.IntN(2) == 0 {
		w.waitFor(id, 10*time.Second, waitingAt("gate"))
	}
	nonce := randHex(6)
	unanswered := false // an earlier try got a fault's answer: its signal may have been stored
	for time.Now().Before(w.deadline()) && w.bg.Err() == nil {
		w.led.update(id, func(r *trackedRun) { r.signalTries++ })
		r := w.api().call(w.bg, "run.signal", "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go", "payload": map[string]any{"nonce": nonce}}, true)
		if r.status == http.StatusAccepted {
			sig := r.str("signalId")
			w.led.update(id, func(r *trackedRun) { r.signals = append(r.signals, sig) })
			return
		}
		if unanswered && r.status == http.StatusConflict && r.str("error") == "run_finished" {
			// The earlier try committed before its answer was lost (a restart cut the
			// connection after COMMIT): its signal released the run, which finished. No
			// signal id came back, so nothing is asserted of this run's signals.
			return
		}
		unanswered = unanswered || r.err != nil || r.status >= 500
		if !r.retryable() {
			w.led.oddf("run.signal %s: %d %s", id, r.status, r.raw)
			return
		}
		time.Sleep(200 * time.Millisecond) // retry pace
	}
}

// cancelRun cancels until an answer that is not a fault's; it returns the run's status then
// ("cancelled", or the status of a run that finished first) or "".
func (w *workload) cancelRun(id string) string {
	r := w.api().retry(w.bg, w.deadline(), "run.cancel", "POST", "/api/runs/"+id+"/cancel", nil, true)
	switch {
	case r.status == http.StatusAccepted && r.str("status") == "cancelled":
		return "cancelled"
	case r.status == http.StatusConflict && r.str("error") == "run_finished":
		return r.str("status")
	case r.retryable():
		return ""
	}
	w.led.oddf("run.cancel %s: %d %s", id, r.status, r.raw)
	return ""
}

// cancelWaiting starts a run that waits for a signal nobody sends and cancels it.
func (w *workload) cancelWaiting() {
	id := w.startRun("hold")
	if id == "" {
		return
	}
	w.waitFor(id, 10*time.Second, waitingAt("hold"))
	if got := w.cancelRun(id); got != "" {
		w.led.update(id, func(r *trackedRun) { r.want = got })
	}
}

// cancelRace cancels a chain of slow steps at a random moment: cancelled if the cancel was
// accepted, else the state the 409 named.
func (w *workload) cancelRace(rng *rand.Rand) {
	id := w.startRun("slow")
	if id == "" {
		return
	}
	time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond) // the race's random moment
	if got := w.cancelRun(id); got != "" {
		w.led.update(id, func(r *trackedRun) { r.want = got })
	}
}

// hook delivers a signed webhook three times at once under one webhook-id (a redelivery
// storm), or redelivers an earlier id; every 202 must name the id's one run.
func (w *workload) hook(rng *rand.Rand) {
	w.led.mu.Lock()
	var id, body string
	if len(w.led.hookBody) > 0 && rng.IntN(4) == 0 {
		n := rng.IntN(len(w.led.hookBody))
		for k, v := range w.led.hookBody {
			if n == 0 {
				id, body = k, v
				break
			}
			n--
		}
	}
	w.led.mu.Unlock()
	copies := 1
	if id == "" {
		id = "msg_" + randHex(8)
		body = fmt.Sprintf(`{"n":%d}`, w.seq.Add(1))
		copies = 3
		w.led.mu.Lock()
		w.led.hookBody[id] = body
		w.led.hooks[id] = map[string]bool{}
		w.led.mu.Unlock()
	}
	var wg sync.WaitGroup
	for range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(w.deadline()) && w.bg.Err() == nil {
				r := w.api().call(w.bg, "webhook", "POST", "/api/webhooks/events/chaos", []byte(body), false, standardHeaders(id, time.Now(), body)...)
				if r.status == http.StatusAccepted {
					run := r.str("workflowRunId")
					w.led.mu.Lock()
					w.led.hooks[id][run] = true
					w.led.mu.Unlock()
					if strings.HasPrefix(run, "run_") {
						w.led.addRun(&trackedRun{id: run, kind: "hook", want: "completed"})
					}
					return
				}
				if !r.retryable() {
					w.led.oddf("webhook %s: %d %s", id, r.status, r.raw)
					return
				}
				time.Sleep(200 * time.Millisecond) // retry pace
			}
		}()
	}
	wg.Wait()
}

func standardHeaders(id string, at time.Time, body string) []string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whSecret, "whsec_"))
	if err != nil {
		panic(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + body))
	return []string{"webhook-id", id, "webhook-timestamp", ts, "webhook-signature", "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}
}

func (w *workload) patchWorkflow(worker int) string {
	r := w.api().retry(w.bg, w.deadline(), "wf.create", "POST", "/api/workflows", map[string]any{
		"name": fmt.Sprintf("chaos-patch-%d-%s", worker, randHex(3)), "definition": line(block("start", "trigger.manual", map[string]any{})),
	}, true)
	if r.status != http.StatusCreated {
		if !r.retryable() {
			w.led.oddf("wf.create: %d %s", r.status, r.raw)
		}
		return ""
	}
	return r.str("id")
}

// readWorkflow returns the workflow's version and block ids, retrying through faults.
func (w *workload) readWorkflow(id string) (int, map[string]bool, bool) {
	r := w.api().retry(w.bg, w.deadline(), "wf.get", "GET", "/api/workflows/"+id, nil, true)
	if r.status != http.StatusOK {
		if !r.retryable() {
			w.led.oddf("wf.get %s: %d %s", id, r.status, r.raw)
		}
		return 0, nil, false
	}
	v, _ := r.body["version"].(float64)
	blocks := map[string]bool{}
	def, _ := r.body["definition"].(map[string]any)
	bs, _ := def["blocks"].([]any)
	for _, b := range bs {
		m, _ := b.(map[string]any)
		if bid, ok := m["block_id"].(string); ok {
			blocks[bid] = true
		}
	}
	return int(v), blocks, true
}

// patch sends five patches with the same If-Match at once; exactly one may apply.
func (w *workload) patch(wf string) {
	version, _, ok := w.readWorkflow(wf)
	if !ok {
		return
	}
	round := patchRound{wf: wf, version: version}
	tag := randHex(3)
	for i := range 5 {
		round.blocks = append(round.blocks, fmt.Sprintf("p%s_%d", tag, i))
	}
	round.statuses = make([]int, len(round.blocks))
	var wg sync.WaitGroup
	for i, b := range round.blocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := w.api().call(w.bg, "wf.patch", "POST", "/api/workflows/"+wf+"/operations", map[string]any{"ops": []any{
				map[string]any{"operation_type": "add", "block_id": b, "type": "log", "params": map[string]any{"message": "chaos"}},
			}}, true, "If-Match", strconv.Itoa(version))
			round.statuses[i] = r.status
		}()
	}
	wg.Wait()
	after, blocks, ok := w.readWorkflow(wf)
	if !ok {
		return
	}
	round.after = after
	for _, b := range round.blocks {
		if blocks[b] {
			round.present = append(round.present, b)
		}
	}
	w.led.mu.Lock()
	w.led.patches = append(w.led.patches, round)
	w.led.mu.Unlock()
}

// tick sends n ticks at once; each fired (schedule, cutoff) is noted with the run it named.
func (w *workload) tick(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := w.api().call(w.bg, "tick", "POST", "/api/admin/tick", nil, true)
			if r.status != http.StatusOK {
				if !r.retryable() && r.status < 500 {
					w.led.oddf("tick: %d %s", r.status, r.raw)
				}
				return
			}
			fired, _ := r.body["fired"].([]any)
			w.led.mu.Lock()
			defer w.led.mu.Unlock()
			for _, f := range fired {
				m, _ := f.(map[string]any)
				key := fmt.Sprint(m["scheduleId"]) + "|" + fmt.Sprint(m["cutoff"])
				if w.led.fires[key] == nil {
					w.led.fires[key] = map[string]bool{}
				}
				w.led.fires[key][fmt.Sprint(m["runId"])] = true
			}
		}()
	}
	wg.Wait()
}
