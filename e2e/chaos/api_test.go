package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// outcome is one request the workload sent: what it was, when, and what came back.
type outcome struct {
	op         string // "run.start", "run.signal", ...
	method     string
	path       string
	start, end time.Time
	status     int    // 0: no HTTP answer
	err        string // transport error
	body       string // kept for 5xx only
}

// recorder keeps every outcome, for the 5xx, recovery and rate-limit figures.
type recorder struct {
	mu  sync.Mutex
	all []outcome
}

func (r *recorder) add(o outcome) {
	r.mu.Lock()
	r.all = append(r.all, o)
	r.mu.Unlock()
}

func (r *recorder) outcomes() []outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outcome(nil), r.all...)
}

// api speaks to the gateway as the suite's one user (a session token), recording each call.
type api struct {
	base   string
	origin string
	token  string
	hc     *http.Client
	rec    *recorder
}

// reply is one answer; status 0 and err set when no HTTP answer came.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
	err    error
}

func (r reply) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

// retryable says whether a client should try again: no answer, a 5xx (a peer or store is
// unavailable; the 5xx check says whether it was a 503 inside a fault) or 429 (rate limited).
func (r reply) retryable() bool {
	return r.err != nil || r.status >= 500 || r.status == http.StatusTooManyRequests
}

func newAPI(base, origin string, rec *recorder) *api {
	return &api{base: base, origin: origin, rec: rec, hc: &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
	}}
}

// call sends one request (body: nil, []byte sent as it is, or a value sent as JSON) with
// header pairs hdr; auth adds the session token.
func (a *api) call(ctx context.Context, op, method, path string, body any, auth bool, hdr ...string) reply {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(raw)
	}
	o := outcome{op: op, method: method, path: path, start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		panic(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Origin", a.origin)
	if auth {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := a.hc.Do(req)
	var r reply
	if err == nil {
		raw, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if rerr != nil {
			err = rerr
		} else {
			r = reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
			_ = json.Unmarshal(raw, &r.body)
		}
	}
	o.end = time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return reply{err: err} // the suite gave up on it: not the system's doing
		}
		r = reply{err: err}
		o.err = err.Error()
	}
	o.status = r.status
	if r.status >= 500 {
		o.body = r.raw
	}
	a.rec.add(o)
	return r
}

// retry repeats call while the answer is retryable, until deadline; it paces the tries (200
// ms, or what Retry-After asks) so a down peer is not hammered.
func (a *api) retry(ctx context.Context, deadline time.Time, op, method, path string, body any, auth bool, hdr ...string) reply {
	for {
		r := a.call(ctx, op, method, path, body, auth, hdr...)
		if !r.retryable() || time.Now().After(deadline) || ctx.Err() != nil {
			return r
		}
		pause := 200 * time.Millisecond
		if s, err := strconv.Atoi(r.header.Get("Retry-After")); err == nil && r.status == http.StatusTooManyRequests {
			pause = min(time.Duration(s)*time.Second, 2*time.Second)
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(pause):
		}
	}
}
