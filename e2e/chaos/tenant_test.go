package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tenant is one organization of the isolation suite: a user signed up through the gateway
// (sign-up makes its personal organization the active one), its workflows and its runs.
type tenant struct {
	name string
	api  *api
	wf   map[string]string // kind → workflow id
}

// newTenant signs a user up; every request it sends is recorded in rec.
func newTenant(t *testing.T, base, name string, rec *recorder) *tenant {
	t.Helper()
	tn := &tenant{name: name, api: newAPI(base, origin, rec), wf: map[string]string{}}
	ctx := setupCtx(t)
	r := tn.api.call(ctx, "setup", "POST", "/api/auth/sign-up/email", map[string]any{
		"email": name + "-" + randHex(6) + "@example.com", "password": "correct horse battery", "name": name,
	}, false)
	if r.status != http.StatusOK || r.str("token") == "" {
		t.Fatalf("sign-up %s: %d %v %s", name, r.status, r.err, r.raw)
	}
	tn.api.token = r.str("token")
	return tn
}

// workflow saves def under kind; a definition the editor refuses fails the suite (the suite's
// own workflows are valid: the bombs hide in the run input, where no save-time check sees them).
func (tn *tenant) workflow(t *testing.T, kind string, def map[string]any) {
	t.Helper()
	r := tn.api.call(setupCtx(t), "setup", "POST", "/api/workflows", map[string]any{"name": tn.name + "-" + kind, "definition": def}, true)
	if r.status != http.StatusCreated {
		t.Fatalf("workflow %s of %s: %d %v %s", kind, tn.name, r.status, r.err, r.raw)
	}
	if errs, _ := r.body["validation_errors"].([]any); len(errs) > 0 {
		t.Fatalf("workflow %s of %s: %s", kind, tn.name, r.raw)
	}
	tn.wf[kind] = r.str("id")
}

// start starts a run of kind as the tenant's user, or with the API key when key is set,
// retrying what a careful client retries (429 after Retry-After, no answer, 5xx) until
// deadline: within its limits means waiting when the rate limit says so.
// Each start carries an Idempotency-Key, so a retry after a lost answer starts no second run.
func (tn *tenant) start(ctx context.Context, deadline time.Time, kind, key string, input map[string]any) reply {
	body := map[string]any{"input": input}
	path := "/api/workflows/" + tn.wf[kind] + "/run"
	idem := tn.name + "-" + randHex(8)
	if key != "" {
		return tn.api.retry(ctx, deadline, "run.start", "POST", path, body, false, "X-Api-Key", key, "Idempotency-Key", idem)
	}
	return tn.api.retry(ctx, deadline, "run.start", "POST", path, body, true, "Idempotency-Key", idem)
}

// answer says what a reply was, for the report: its status and error code, or the transport
// error when no answer came.
func answer(r reply) string {
	if r.status == 0 && r.err == nil {
		return "no answer"
	}
	if r.status == 0 {
		return fmt.Sprintf("no answer (%v)", r.err)
	}
	code := r.str("error")
	if code == "" {
		code = r.str("code")
	}
	return fmt.Sprintf("%d %s", r.status, code)
}

// runState is what a GET of a run says of its end.
type runState struct {
	status   string
	finished time.Time // zero until it ended
	message  string    // error.message of a failed run
}

func (tn *tenant) get(ctx context.Context, id string) (runState, bool) {
	r := tn.api.call(ctx, "run.get", "GET", "/api/runs/"+id, nil, true)
	if r.status != http.StatusOK {
		return runState{}, false
	}
	st := runState{status: r.str("status")}
	if f, err := time.Parse(time.RFC3339Nano, r.str("finishedAt")); err == nil {
		st.finished = f
	}
	if e, ok := r.body["error"].(map[string]any); ok {
		st.message, _ = e["message"].(string)
	}
	return st, true
}

// waitEnd polls the run until it ended, ctx ends or deadline passes; the last reading says
// which.
func (tn *tenant) waitEnd(ctx context.Context, id string, deadline time.Time, pace time.Duration) runState {
	var last runState
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if st, ok := tn.get(ctx, id); ok {
			last = st
			if terminal(st.status) {
				return st
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(pace): // polling pace
		}
	}
	return last
}

// failureCode is the error code of the run's last failed attempt ("" when it has none): what
// a bound that was hit says about itself.
func (tn *tenant) failureCode(ctx context.Context, id string) string {
	code := ""
	after := ""
	for range 50 { // pages: a flood run has a few hundred attempts at most
		path := "/api/runs/" + id + "/logs?limit=1000"
		if after != "" {
			path += "&after=" + after
		}
		r := tn.api.call(ctx, "run.logs", "GET", path, nil, true)
		if r.status != http.StatusOK {
			return code
		}
		items, _ := r.body["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if e, ok := m["error"].(map[string]any); ok && m["status"] == "failed" {
				c, _ := e["code"].(string)
				if c == "" {
					c = "(no code)"
				}
				code = c
			}
		}
		next, _ := r.body["nextCursor"].(string)
		if len(items) == 0 || next == "" || next == after {
			return code
		}
		after = next
	}
	return code
}

// sse is an open event stream through the gateway; events are handed to each as they come.
type sse struct {
	status int
	body   string // the error body when status is not 200
	done   chan struct{}
}

// openSSE opens path as the tenant's user (or with key). Cancel ctx to close it. The request is
// recorded like any other (a 5xx counts).
func (tn *tenant) openSSE(ctx context.Context, path, key string, each func(kind string, data string)) *sse {
	a := tn.api
	o := outcome{op: "events", method: "GET", path: path, start: time.Now()}
	s := &sse{done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Origin", a.origin)
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	} else {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	// No client timeout: the stream stays open as long as ctx.
	resp, err := (&http.Client{Transport: a.hc.Transport}).Do(req)
	o.end = time.Now()
	if err != nil {
		close(s.done)
		if ctx.Err() == nil {
			o.err = err.Error()
			a.rec.add(o)
		}
		return s
	}
	o.status, s.status = resp.StatusCode, resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		_ = resp.Body.Close()
		s.body = b.String()
		if o.status >= 500 {
			o.body = s.body
		}
		a.rec.add(o)
		close(s.done)
		return s
	}
	a.rec.add(o)
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				kind = ""
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && each != nil:
				each(kind, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return s
}

// endpoint is the HTTP server the tenants' http.request steps call: /fast answers at once,
// /slow?ms= after ms (counting the calls in flight, to see every worker used), /big?kb= with
// a JSON body of about kb KiB.
type endpoint struct {
	url      string
	inflight atomic.Int64
	peak     atomic.Int64
	calls    atomic.Int64
}

func newEndpoint(t *testing.T) *endpoint {
	t.Helper()
	e := &endpoint{}
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		n := e.inflight.Add(1)
		defer e.inflight.Add(-1)
		for p := e.peak.Load(); n > p && !e.peak.CompareAndSwap(p, n); p = e.peak.Load() {
		}
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		kb, _ := strconv.Atoi(r.URL.Query().Get("kb"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"pad":"%s"}`, strings.Repeat("a", kb<<10))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// resetPeak starts a new measure of the calls in flight.
func (e *endpoint) resetPeak() { e.peak.Store(e.inflight.Load()) }

// step is an http.request block to the endpoint.
func (e *endpoint) step(id, path string) map[string]any {
	return block(id, "http.request", map[string]any{"method": "GET", "url": e.url + path, "timeout_ms": 30000})
}

// graph is a definition with the given blocks and edges (pairs of block ids).
func graph(blocks []map[string]any, edges ...[2]string) map[string]any {
	bs := make([]any, len(blocks))
	for i, b := range blocks {
		bs[i] = b
	}
	es := make([]any, len(edges))
	for i, e := range edges {
		es[i] = map[string]any{"block_id": e[0], "target_block_id": e[1]}
	}
	return map[string]any{"blocks": bs, "edges": es}
}

// guarded is a value shared between the suite's goroutines.
type guarded[T any] struct {
	mu sync.Mutex
	v  T
}

func (g *guarded[T]) with(f func(v *T)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(&g.v)
}
