package fuzz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc.dev/e2e/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// Settings of a run.
const (
	defaultRequests = 2500 // the short run inside make test; make fuzz sets SVC_FUZZ_REQUESTS
	roundSize       = 500  // requests per round: a mixed phase, then a rejected-only phase
	mixedShare      = 0.6  // of a round, the mixed phase's share
	workers         = 4    // concurrent senders in the mixed phase
	maxFailures     = 200  // failures kept (each kind keeps its first ones); the run goes on
	requestTimeout  = 30 * time.Second
	streamRead      = 200 * time.Millisecond
	testOrigin      = "http://fuzz.test"
)

// request is one HTTP request as sent, with what generated it.
type request struct {
	N           uint64
	Op          *operation // the operation it was generated for; nil for none
	Kind        string     // "valid" or "mut/<mutation>"
	Method      string
	Path        string // as sent: escaped, possibly with ?query
	Header      http.Header
	Body        []byte
	Chunked     bool // sent without a Content-Length
	PathMutated bool
	Expect      *expectation
	obj         map[string]any // the body before mutation, when it was an object
	base        string         // another gateway's address; "" for the system's
}

// expectation is what the contract says the answer must be.
type expectation struct {
	Status int      // 0: any status but Not
	Not    int      // a status it must not be
	Codes  []string // one of them; none: any
	Why    string
}

type result struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
	Took   time.Duration
	// Size is the whole body's length; Body keeps its first maxRead bytes. A list of 500 runs
	// whose inputs are near 1 MiB each is legitimately hundreds of MiB: such a body is read to
	// its end but not parsed.
	Size int64
}

// maxRead is how much of a body the fuzzer keeps and checks.
const maxRead = 8 << 20

// route is the operation's name in the summary, or what the path was.
func (r *request) route() string {
	if r.Op != nil {
		return r.Op.Method + " " + r.Op.Path
	}
	return r.Method + " (other)"
}

// String prints the request so that it can be replayed with curl.
func (r *request) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s [%s]\n  %s %s\n", r.N, r.route(), r.Kind, r.Method, r.Path)
	for _, k := range sortedKeys(r.Header) {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&b, "  %s: %s\n", k, truncate(v, 200))
		}
	}
	if r.Chunked {
		b.WriteString("  (chunked, no Content-Length)\n")
	}
	if len(r.Body) > 0 {
		fmt.Fprintf(&b, "  body (%d bytes): %s\n", len(r.Body), truncate(strconv.QuoteToGraphic(string(r.Body)), 600))
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(+%d bytes)", len(s)-n)
}

type slowOne struct {
	took time.Duration
	what string
}

// fuzzer holds the run: the document, the system, its fixtures and the tallies.
type fuzzer struct {
	t      *testing.T
	ctx    context.Context
	sys    *harness.System
	spec   *spec
	seed   uint64
	client *http.Client
	probe  *stateProbe
	fx     *fixtures
	muts   []mutation
	trace  bool // SVC_FUZZ_TRACE=1: log every exchange

	seq      atomic.Uint64
	count429 atomic.Int64
	expected atomic.Int64 // requests with a definite answer from the contract

	mu       sync.Mutex
	stats    map[string]map[string]int // route → status class → requests
	byKind   map[string]int            // generator → requests
	opsSeen  map[string]bool
	failures map[string][]failure // kind → the first ones
	nFail    map[string]int       // kind → all of them
	stuck    []string             // runs reported stuck, left out of later settling
	slowest  []slowOne            // the slowest exchanges, slowest first
	settling time.Duration        // time spent waiting for a still system
	rejected int                  // rejected requests whose state was checked
}

// TestHTTPFuzz sends SVC_FUZZ_REQUESTS requests (default 2,500) generated from the OpenAPI
// document to the real system through the gateway, in rounds: a mixed phase (valid requests,
// boundary values and mutations, concurrently) and then a rejected-only phase (mutations, one
// at a time, the database fingerprinted around each, so that a rejected request that stored
// anything is caught exactly). Every answer is checked: no 5xx, error bodies in the contract's
// shape with a code from its table for that route, documented 2xx bodies, the headers of
// docs/API.md (Conventions), and the API's definite answers (401 without credentials, 400
// invalid_query for a bad limit, 405 for a wrong method, ...). Failures are printed with the
// exact request and collected; the run fails at the end with a summary grouped by kind.
func TestHTTPFuzz(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SVC_FUZZ_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SVC_FUZZ_SEED: %v", err)
		}
		seed = v
	}
	total := defaultRequests
	if s := os.Getenv("SVC_FUZZ_REQUESTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("SVC_FUZZ_REQUESTS: %q is not a positive integer", s)
		}
		total = v
	}
	t.Logf("fuzz seed %d (replay with SVC_FUZZ_SEED=%d), %d requests", seed, seed, total)
	f := setup(t, seed)
	started := time.Now()

	sent := 0
	for round := 0; sent < total; round++ {
		n := min(roundSize, total-sent)
		mixed := int(float64(n) * mixedShare)
		f.mixedPhase(round, mixed)
		f.rejectedPhase(round, n-mixed)
		sent += n
		t.Logf("round %d: %d requests so far, %s", round, f.seq.Load(), time.Since(started).Round(time.Second))
	}
	f.rateLimitShape()
	f.report(time.Since(started))
}

// ---------------------------------------------------------------------------------------
// Sending and recording.

// send performs the request and checks the answer; it never fails the test by itself.
func (f *fuzzer) send(req *request) *result {
	req.N = f.seq.Add(1)
	if req.Expect != nil {
		f.expected.Add(1)
	}
	res := f.do(req)
	f.record(req, res, f.checkResponse(req, res))
	if f.trace {
		f.t.Logf("trace %s%s", req, resString(res))
	}
	return res
}

func (f *fuzzer) do(req *request) *result {
	var body io.Reader
	if req.Body != nil {
		if req.Chunked {
			body = io.MultiReader(bytes.NewReader(req.Body)) // no Len(): sent chunked
		} else {
			body = bytes.NewReader(req.Body)
		}
	}
	ctx, cancel := context.WithTimeout(f.ctx, requestTimeout)
	defer cancel()
	base := f.sys.BaseURL
	if req.base != "" {
		base = req.base
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, base+req.Path, body)
	if err != nil {
		// A path Go's client refuses to send is the generator's mistake, not the server's.
		f.t.Fatalf("fuzz: cannot build request %s: %v", req, err)
	}
	if req.Body != nil && !req.Chunked {
		hr.ContentLength = int64(len(req.Body))
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if req.Header.Get("Host") != "" {
		hr.Host = req.Header.Get("Host")
	}
	start := time.Now()
	resp, err := f.client.Do(hr)
	res := &result{Err: err}
	if err == nil {
		res.Status = resp.StatusCode
		res.Header = resp.Header
		if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" && resp.StatusCode == http.StatusOK {
			// An event stream lasts until its run ends (the organization's: until the client
			// leaves): its start is what is checked, then the client leaves.
			t := time.AfterFunc(streamRead, cancel)
			res.Body, _ = io.ReadAll(io.LimitReader(resp.Body, maxRead))
			t.Stop()
			res.Size = int64(len(res.Body))
			resp.Body.Close()
			res.Took = time.Since(start)
			return res
		}
		res.Body, res.Err = io.ReadAll(io.LimitReader(resp.Body, maxRead))
		res.Size = int64(len(res.Body))
		if res.Err == nil && res.Size == maxRead {
			rest, err := io.Copy(io.Discard, resp.Body)
			res.Size, res.Err = res.Size+rest, err
		}
		resp.Body.Close()
	}
	res.Took = time.Since(start)
	return res
}

func statusClass(res *result) string {
	if res.Err != nil {
		return "error"
	}
	return fmt.Sprintf("%dxx", res.Status/100)
}

func (f *fuzzer) record(req *request, res *result, fails []failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	route := req.route()
	if f.stats[route] == nil {
		f.stats[route] = map[string]int{}
	}
	f.stats[route][statusClass(res)]++
	if res.Err == nil {
		f.stats[route][strconv.Itoa(res.Status)]++
	}
	kind := req.Kind
	if i := strings.IndexByte(kind, ':'); i >= 0 {
		kind = kind[:i]
	}
	f.byKind[kind]++
	if len(f.slowest) < 5 || res.Took > f.slowest[len(f.slowest)-1].took {
		f.slowest = append(f.slowest, slowOne{res.Took, fmt.Sprintf("#%d %s %s [%s] -> %s", req.N, req.Method, truncate(req.Path, 80), req.Kind, statusClass(res))})
		sort.Slice(f.slowest, func(i, j int) bool { return f.slowest[i].took > f.slowest[j].took })
		if len(f.slowest) > 5 {
			f.slowest = f.slowest[:5]
		}
	}
	if req.Op != nil {
		f.opsSeen[req.Op.ID] = true
	}
	for _, fl := range fails {
		f.addFailure(fl)
	}
}

// addFailure keeps the failure (up to maxFailures, spread over kinds) and prints it at once.
func (f *fuzzer) addFailure(fl failure) {
	f.nFail[fl.Kind]++
	kept := 0
	for _, l := range f.failures {
		kept += len(l)
	}
	if kept >= maxFailures || len(f.failures[fl.Kind]) >= maxFailures/4 {
		return
	}
	f.failures[fl.Kind] = append(f.failures[fl.Kind], fl)
	f.t.Logf("FAIL %s: %s\n%s%s", fl.Kind, fl.Detail, reqString(fl.Req), resString(fl.Res))
}

func (f *fuzzer) fail(kind, detail string, req *request, res *result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addFailure(failure{Kind: kind, Detail: detail, Req: req, Res: res})
}

func reqString(r *request) string {
	if r == nil {
		return ""
	}
	return r.String()
}

func resString(r *result) string {
	if r == nil {
		return ""
	}
	if r.Err != nil {
		return fmt.Sprintf("  -> error after %s: %v\n", r.Took.Round(time.Millisecond), r.Err)
	}
	return fmt.Sprintf("  -> %d in %s, Content-Type %q: %s\n", r.Status, r.Took.Round(time.Millisecond), r.Header.Get("Content-Type"), truncate(string(r.Body), 500))
}

// ---------------------------------------------------------------------------------------
// Phases.

// mixedPhase sends n requests with workers senders: first one valid request of every
// operation, then random valid requests and mutations.
func (f *fuzzer) mixedPhase(round, n int) {
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := f.rng(round, 0, i)
				var op *operation
				if i < len(f.spec.Ops) {
					op = f.spec.Ops[i]
				} else {
					op = f.pickOp(r)
				}
				if i < len(f.spec.Ops) || r.IntN(100) < 45 {
					f.sendValid(r, op)
				} else {
					f.send(f.mutate(r, op, false))
				}
			}
		}()
	}
	wg.Wait()
}

// rejectedPhase sends n mutations one at a time. Before each, the system is settled; the
// database is fingerprinted before and after each request, and a rejected (4xx) request
// must leave every fingerprint as it was.
func (f *fuzzer) rejectedPhase(round, n int) {
	f.refillTrash()
	before, err := f.settle()
	if err != nil {
		f.t.Fatalf("fuzz: settle: %v", err)
	}
	for i := range n {
		r := f.rng(round, 1, i)
		op := f.spec.Ops[(round*7+i)%len(f.spec.Ops)]
		if i >= len(f.spec.Ops) {
			op = f.pickOp(r)
		}
		req := f.mutate(r, op, true)
		res := f.send(req)
		after, err := f.probe.snapshot(f.ctx)
		if err != nil {
			f.t.Fatalf("fuzz: snapshot: %v", err)
		}
		if res.Err == nil && res.Status >= 400 && res.Status < 500 {
			f.mu.Lock()
			f.rejected++
			f.mu.Unlock()
			clean, _, _ := f.target(req)
			if d := within(before.diff(after), reach(clean)); len(d) > 0 {
				// Was it the request? Only if the system is otherwise still: settle, and see
				// whether the tables moved again on their own. (Tables of services the request
				// cannot reach are left out: a change there is the engine finishing earlier
				// work.)
				again, err := f.settle()
				if err != nil {
					f.t.Fatalf("fuzz: settle: %v", err)
				}
				if len(after.diff(again)) == 0 {
					f.fail("stored-by-rejected", fmt.Sprintf("a rejected request changed %s", strings.Join(d, ", ")), req, res)
				}
				after = again
			}
		} else if req.Op != nil && req.Op.mutating() {
			// Accepted (or failed): its effects may go on for a while; start the next one
			// from a still system.
			if after, err = f.settle(); err != nil {
				f.t.Fatalf("fuzz: settle: %v", err)
			}
		}
		before = after
	}
}

// settle waits for a still system; runs that never finish are reported once and left out.
func (f *fuzzer) settle() (snapshot, error) {
	start := time.Now()
	defer func() {
		f.mu.Lock()
		f.settling += time.Since(start)
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		ignore := append([]string(nil), f.stuck...)
		f.mu.Unlock()
		s, err := f.probe.quiet(f.ctx, 30*time.Second, ignore)
		var un *errUnsettled
		if err == nil || !errorsAs(err, &un) {
			return s, err
		}
		if len(un.Busy) == 0 {
			// No run in flight, yet work pending or tables moving after 30 s: go on from here
			// (a change this leaves may be reported against the next rejected request, with
			// the tables it touched, for a person to judge).
			f.t.Logf("fuzz: the system did not settle within 30 s (%v); going on", un)
			return s, nil
		}
		for _, id := range un.Busy {
			f.fail("stuck-run", fmt.Sprintf("run %s is still queued or running after 30 s of quiet: %s", id, f.probe.runRow(f.ctx, id)), nil, nil)
			f.mu.Lock()
			f.stuck = append(f.stuck, id)
			f.mu.Unlock()
		}
	}
}

// rng is the random source of one request: the seed, the round, the phase and the index
// decide it, whatever order the workers take requests in.
func (f *fuzzer) rng(round, phase, i int) *rand.Rand {
	return rand.New(rand.NewPCG(f.seed, uint64(round)<<40|uint64(phase)<<32|uint64(i)))
}

// opWeight makes the password-hashing routes rarer: each request costs an argon2id hash.
func opWeight(op *operation) int {
	switch op.ID {
	case "authSignUpEmail", "authSignInEmail", "authChangePassword", "authResetPassword", "bootstrap":
		return 1
	}
	return 4
}

func (f *fuzzer) pickOp(r *rand.Rand) *operation {
	total := 0
	for _, op := range f.spec.Ops {
		total += opWeight(op)
	}
	k := r.IntN(total)
	for _, op := range f.spec.Ops {
		k -= opWeight(op)
		if k < 0 {
			return op
		}
	}
	return f.spec.Ops[0]
}

// ---------------------------------------------------------------------------------------
// Report.

func (f *fuzzer) report(took time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	classes := []string{"2xx", "3xx", "4xx", "5xx", "error"}
	totals := map[string]int{}
	all := 0
	fmt.Fprintf(&b, "\nHTTP fuzz summary: seed %d, %d requests in %s (%.0f/s), %d with a definite answer from the contract, %d rejected requests checked for stored state, %d answers 429\n\n",
		f.seed, f.seq.Load(), took.Round(time.Second), float64(f.seq.Load())/took.Seconds(), f.expected.Load(), f.rejected, f.count429.Load())
	fmt.Fprintf(&b, "%-48s %7s %7s %7s %7s %7s %7s  %s\n", "route", "total", "2xx", "3xx", "4xx", "5xx", "error", "statuses")
	for _, route := range sortedKeys(f.stats) {
		st := f.stats[route]
		n := 0
		for _, c := range classes {
			n += st[c]
			totals[c] += st[c]
		}
		all += n
		var codes []string
		for _, k := range sortedKeys(st) {
			if !strings.HasSuffix(k, "xx") && k != "error" {
				codes = append(codes, fmt.Sprintf("%s:%d", k, st[k]))
			}
		}
		fmt.Fprintf(&b, "%-48s %7d %7d %7d %7d %7d %7d  %s\n", route, n, st["2xx"], st["3xx"], st["4xx"], st["5xx"], st["error"], strings.Join(codes, " "))
	}
	fmt.Fprintf(&b, "%-48s %7d %7d %7d %7d %7d %7d\n\n", "all", all, totals["2xx"], totals["3xx"], totals["4xx"], totals["5xx"], totals["error"])
	fmt.Fprintf(&b, "time spent waiting for a still system (rejected-only phases): %s; slowest answers:\n", f.settling.Round(time.Millisecond))
	for _, s := range f.slowest {
		fmt.Fprintf(&b, "  %8s %s\n", s.took.Round(time.Millisecond), s.what)
	}
	fmt.Fprintf(&b, "by generator:")
	for _, k := range sortedKeys(f.byKind) {
		fmt.Fprintf(&b, " %s %d", k, f.byKind[k])
	}
	b.WriteString("\n")
	var missing []string
	for _, op := range f.spec.Ops {
		if !f.opsSeen[op.ID] {
			missing = append(missing, op.ID)
		}
	}
	if len(missing) > 0 {
		f.nFail["coverage"]++
		f.failures["coverage"] = append(f.failures["coverage"], failure{Kind: "coverage", Detail: "operations never requested: " + strings.Join(missing, ", ")})
	}
	kinds := sortedKeys(f.nFail)
	defer func() {
		// make fuzz shows the logs of failing tests only: the figures also go to a file.
		p := os.Getenv("SVC_FUZZ_REPORT")
		if p == "" {
			p = filepath.Join(os.TempDir(), fmt.Sprintf("svc-fuzz-%d.txt", f.seed))
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err == nil {
			f.t.Logf("fuzz: summary written to %s", p)
		}
	}()
	if len(kinds) == 0 {
		b.WriteString("failures: none\n")
		f.t.Log(b.String())
		return
	}
	sort.Slice(kinds, func(i, j int) bool { return f.nFail[kinds[i]] > f.nFail[kinds[j]] })
	b.WriteString("failures by kind:\n")
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-20s %6d\n", k, f.nFail[k])
		seen := map[string]bool{}
		for _, fl := range f.failures[k] {
			key := fl.Detail
			if fl.Req != nil {
				key = fl.Req.route() + " " + fl.Detail
			}
			if len(key) > 160 {
				key = key[:160]
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			fmt.Fprintf(&b, "    - %s\n", truncate(key, 300))
		}
	}
	f.t.Log(b.String())
	f.t.Errorf("fuzz: %d failures of %d kinds (seed %d); each is printed above with its request", sumValues(f.nFail), len(kinds), f.seed)
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func urlPathUnescape(p string) (string, error) { return url.PathUnescape(p) }
