package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Target is the request a phase sends over and over, and the answer that counts as success.
type Target struct {
	Method string // GET when empty
	URL    string
	Header http.Header
	Body   []byte // sent with every request when set
	// Prepare, when set, adapts request i before it leaves: i counts the phase's slots from 0,
	// warm-up included (Phase.Requests of them). It makes requests that cannot be the same each
	// time, e.g. signed anew or sent to a workflow of their own. Its time counts in the latency,
	// so it must be cheap.
	Prepare func(i int, req *http.Request)
	Expect  int // the status a correct answer has; any other is a status error
	// Check, when set, reads the body of an answer with the expected status; an error makes it
	// a status error too (a 200 that did not do the work is no success).
	Check func(body []byte) error
	// Per names what one request is in the CPU line ("run" for POST /run); "request" when empty.
	Per string
}

// Phase is one run of the load generator: Warmup at Rate, not recorded, then Duration at Rate,
// recorded.
type Phase struct {
	Target   Target
	Rate     float64 // requests per second
	Warmup   time.Duration
	Duration time.Duration
	// CPU, when set, measures the CPU of the system's processes over the measured window.
	CPU *cpuMeter
}

// Stats summarise the measured part of a phase. Latencies count from the moment a request was
// scheduled to the last byte of its answer, over every request that got an HTTP answer (the
// expected status or not); transport errors have no answer and only count as errors.
type Stats struct {
	TargetRate      float64
	AchievedRate    float64 // expected answers per second of the measured window
	N               int     // requests scheduled in the measured window
	TransportErrors int     // no HTTP answer: refused, reset, timed out
	StatusErrors    int     // an answer with a status other than Target.Expect, or one Target.Check refused
	P50, P90, P99   time.Duration
	Max             time.Duration
	FirstError      string // what the first failed request of the measured window got, for the report
	// CPU is what the system's processes used in the measured window, by process; nil when
	// not measured. It belongs to the row whose n it was taken over: rows derived from a
	// phase's numbers copy the fields they need, not this one.
	CPU *cpuUse
}

// Generator sends requests open-loop: each one leaves at its slot of a fixed time grid, no
// matter how long earlier ones take, and its latency counts from that slot. A closed loop (send,
// wait, send) slows down with the system and so hides its stalls: the requests that should have
// been sent during a stall are never sent, and the ones that were look fast ("coordinated
// omission"). Requests that would exceed maxInFlight wait for a free slot, and that wait counts
// in their latency too.
type Generator struct {
	client      *http.Client
	maxInFlight int
	slow        *slowLog // nil: slow requests are not listed
}

// NewGenerator returns a generator that sends through client with at most maxInFlight requests
// outstanding. client is shared by every phase so connections are reused (keep-alive), as a
// real client fleet would.
func NewGenerator(client *http.Client, maxInFlight int) *Generator {
	if client == nil {
		panic("nil client")
	}
	if maxInFlight < 1 {
		panic("maxInFlight must be at least 1")
	}
	return &Generator{client: client, maxInFlight: maxInFlight}
}

// newHTTPClient is the pooled client the generator needs: enough idle connections per host that
// every in-flight request can keep its own, no compression (it would be measured too), and a
// timeout so a dead system ends a phase instead of hanging it.
func newHTTPClient(maxInFlight int) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil, // benchmarks talk to this machine, never through a proxy
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        maxInFlight * 2,
			MaxIdleConnsPerHost: maxInFlight,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		// A redirect would be a second request the schedule did not ask for.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type outcome uint8

const (
	outcomeNone      outcome = iota // never sent (the phase was interrupted)
	outcomeOK                       // the expected status
	outcomeStatus                   // another status
	outcomeTransport                // no answer
)

// sample is what one request left behind. Each request writes only its own element, so the
// slice needs no lock; wg.Wait orders the writes before the reads.
type sample struct {
	at      time.Time     // the scheduled send time
	late    time.Duration // from the scheduled send time to the request's leaving (the generator's own delay)
	latency time.Duration // from the scheduled send time to the end of the body
	done    time.Time
	outcome outcome
	detail  string // why it failed; empty for a success
}

// Requests is how many requests p sends, warm-up included: the slots of its schedule.
func (p Phase) Requests() int {
	n := 0
	for p.slot(n) < p.Warmup+p.Duration {
		n++
	}
	return n
}

// slot is when request i leaves, counted from the phase's start; computed from i each time so
// rounding never accumulates.
func (p Phase) slot(i int) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / p.Rate)
}

// Run sends p and returns the stats of its measured part. It returns ctx's error, and no stats,
// when ctx ends first.
func (g *Generator) Run(ctx context.Context, p Phase) (Stats, error) {
	if p.Rate <= 0 || p.Duration <= 0 || p.Warmup < 0 {
		return Stats{}, fmt.Errorf("phase needs a positive rate and duration, got rate %g duration %s warm-up %s", p.Rate, p.Duration, p.Warmup)
	}
	method := p.Target.Method
	if method == "" {
		method = http.MethodGet
	}
	if _, err := http.NewRequestWithContext(ctx, method, p.Target.URL, nil); err != nil {
		return Stats{}, fmt.Errorf("target: %w", err)
	}
	slot := p.slot
	total := p.Requests()
	first := 0 // first measured slot
	for slot(first) < p.Warmup {
		first++
	}
	samples := make([]sample, total)
	inFlight := make(chan struct{}, g.maxInFlight)
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()

	start := time.Now()
	cpu := p.CPU.from(start.Add(slot(first)), p.Target.Per)
schedule:
	for i := range total {
		at := start.Add(slot(i))
		// A late scheduler (GC, a busy machine) sends the slots it missed at once rather than
		// skipping them: they count late, from their slot.
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break schedule
			case <-timer.C:
			}
		}
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
			break schedule
		}
		wg.Go(func() {
			defer func() { <-inFlight }()
			samples[i] = g.send(ctx, method, p.Target, i, at)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	use := cpu.stop()
	g.slow.write(fmt.Sprintf("%s %s at %g/s", method, p.Target.URL, p.Rate), samples[first:])
	st := summarize(samples[first:], start.Add(slot(first)), p.Duration, p.Rate)
	st.CPU = use
	return st, nil
}

// send makes request i and reads its answer to the end, so the connection goes back to the
// pool and the latency includes the body.
func (g *Generator) send(ctx context.Context, method string, t Target, i int, at time.Time) sample {
	failed := func(err error) sample {
		return sample{at: at, latency: time.Since(at), done: time.Now(), outcome: outcomeTransport, detail: err.Error()}
	}
	var body io.Reader
	if t.Body != nil {
		body = bytes.NewReader(t.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.URL, body)
	if err != nil {
		return failed(err)
	}
	for k, vs := range t.Header {
		req.Header[k] = vs
	}
	if t.Prepare != nil {
		t.Prepare(i, req)
	}
	sent := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		return failed(err)
	}
	// The body is kept only when something reads it: the check, or the report of a wrong
	// status (its first bytes).
	var got []byte
	switch {
	case resp.StatusCode != t.Expect:
		got, err = io.ReadAll(io.LimitReader(resp.Body, 512))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
		}
	case t.Check != nil:
		got, err = io.ReadAll(resp.Body)
	default:
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	now := time.Now()
	s := sample{at: at, late: sent.Sub(at), latency: now.Sub(at), done: now, outcome: outcomeOK}
	switch {
	case err != nil:
		s.outcome, s.detail = outcomeTransport, "reading the body: "+err.Error()
	case resp.StatusCode != t.Expect:
		s.outcome, s.detail = outcomeStatus, fmt.Sprintf("%s %s: status %d: %s", method, req.URL.Path, resp.StatusCode, got)
	case t.Check != nil:
		if cerr := t.Check(got); cerr != nil {
			s.outcome, s.detail = outcomeStatus, fmt.Sprintf("%s %s: %d but %v", method, req.URL.Path, resp.StatusCode, cerr)
		}
	}
	return s
}

// summarize turns the samples of the measured window into Stats. The window starts at from and
// lasts d, or longer when answers came in after it closed: a system that falls behind shows a
// lower achieved rate, not a full one.
func summarize(samples []sample, from time.Time, d time.Duration, rate float64) Stats {
	st := Stats{TargetRate: rate, N: len(samples)}
	lat := make([]time.Duration, 0, len(samples))
	window := d
	ok := 0
	for _, s := range samples {
		if s.detail != "" && st.FirstError == "" {
			st.FirstError = s.detail
		}
		switch s.outcome {
		case outcomeOK:
			ok++
		case outcomeStatus:
			st.StatusErrors++
		case outcomeTransport:
			st.TransportErrors++
			continue
		case outcomeNone:
			continue
		}
		lat = append(lat, s.latency)
		window = max(window, s.done.Sub(from))
	}
	st.AchievedRate = float64(ok) / window.Seconds()
	slices.Sort(lat)
	st.P50 = percentile(lat, 0.50)
	st.P90 = percentile(lat, 0.90)
	st.P99 = percentile(lat, 0.99)
	st.Max = percentile(lat, 1)
	return st
}

// percentile returns the q-quantile (0 < q ≤ 1) of sorted by the nearest-rank method: the
// smallest value with at least q of all values at or below it. pgbench-step.sh uses the same
// rule, so the baseline and the scenarios read alike. It is 0 for no values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// ceil(q*n) with a tolerance, so 0.9*10 is rank 9 despite floating point.
	k := int(q*float64(n) + 0.999999)
	k = min(max(k, 1), n)
	return sorted[k-1]
}
