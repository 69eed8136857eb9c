package service_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartsNeverStick is issue 12's property: whatever input a client sends (valid, at the
// limits, hostile), a start answers 202 or a 4xx of the contract (never a 5xx); every 202'd
// run reaches a terminal state or a documented wait; and cancel of every run not yet
// terminal succeeds. Inputs come from a seeded generator (SVC_PROPERTY_SEED replays one run,
// SVC_PROPERTY_CASES sets how many starts).
func TestStartsNeverStick(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SVC_PROPERTY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	cases := 150
	if n, err := strconv.Atoi(os.Getenv("SVC_PROPERTY_CASES")); err == nil && n > 0 {
		cases = n
	}
	t.Logf("seed %d (SVC_PROPERTY_SEED=%d replays it), %d starts", seed, seed, cases)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	sys := start(t)
	b := sys.setup(t)
	// Workflows that read the input every way a block can: templates whole and in part,
	// an expression, a wait on a signal (a documented waiting state), a sleep, retries.
	workflows := map[string]string{
		"wf_echo": def([]string{manual,
			`{"block_id":"echo","type":"transform","params":{"value":"{{ input }}"}}`,
			`{"block_id":"say","type":"log","params":{"message":"got {{ input }}"}}`,
		}, edge("start", "echo"), edge("echo", "say")),
		"wf_branch": def([]string{manual,
			`{"block_id":"check","type":"condition","params":{"expression":"input != nil && input.n > 5"}}`,
			`{"block_id":"yes","type":"log","params":{"message":"{{ input.n }}"}}`,
			`{"block_id":"no","type":"transform","params":{"value":{"in":"{{ input }}","n":"{{ input.n }}"}}}`,
		}, edge("start", "check"), `{"block_id":"check","target_block_id":"yes","branch":"true"}`,
			`{"block_id":"check","target_block_id":"no","branch":"false"}`),
		"wf_signal": def([]string{manual,
			`{"block_id":"hold","type":"wait","params":{"signal":"go"}}`,
			`{"block_id":"after","type":"log","params":{"message":"{{ steps.hold.output.signal.payload }} {{ input }}"}}`,
		}, edge("start", "hold"), edge("hold", "after")),
		"wf_sleep": def([]string{manual,
			`{"block_id":"nap","type":"wait","params":{"duration":"50ms"}}`,
			`{"block_id":"flaky","type":"fail","params":{"message":"{{ input }}","fail_attempts":1}}`,
		}, edge("start", "nap"), edge("nap", "flaky")),
		"wf_schema": def([]string{`{"block_id":"start","type":"trigger.manual","params":{"input_schema":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}}}`,
			`{"block_id":"out","type":"transform","params":{"value":"{{ input.n }}"}}`,
		}, edge("start", "out")),
	}
	names := make([]string, 0, len(workflows))
	for id, d := range workflows {
		b.workflow(t, id, 1, d)
		names = append(names, id)
	}

	type started struct{ id, wf, body string }
	var (
		mu       sync.Mutex
		runs     []started
		statuses = map[int]int{}
	)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for i := range work {
				mu.Lock()
				wf := names[rng.IntN(len(names))]
				body := startBody(rng)
				mu.Unlock()
				r := b.do(t, "POST", "/api/workflows/"+wf+"/run", rawBody(body))
				mu.Lock()
				statuses[r.Status]++
				mu.Unlock()
				switch {
				case r.Status == http.StatusAccepted:
					mu.Lock()
					runs = append(runs, started{id: r.Body["runId"].(string), wf: wf, body: body})
					mu.Unlock()
				case r.Status == http.StatusBadRequest && (r.Body["error"] == "invalid_body" || r.Body["error"] == "workflow_invalid"):
				default:
					t.Errorf("case %d: start of %s with %q answered %d %s", i, wf, clip(body), r.Status, r.Raw)
				}
			}
		})
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("start answers by status: %v", statuses)
	require.NotEmpty(t, runs, "some starts were accepted")

	// Every accepted run settles: terminal, or parked on its signal wait.
	settled := func(run map[string]any) bool {
		switch run["status"] {
		case "completed", "failed", "cancelled":
			return true
		case "waiting":
			w, _ := run["waiting"].(map[string]any)
			return w != nil && w["kind"] == "signal" && w["signal"] == "go"
		}
		return false
	}
	var final sync.Map
	for _, s := range runs {
		var last map[string]any
		ok := pollUntil(15*time.Second, func() bool {
			r := b.do(t, "GET", "/api/runs/"+s.id, nil)
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			last = r.Body
			return settled(last)
		})
		require.True(t, ok, "run %s of %s (body %q) never settled: %v\nlogs: %v", s.id, s.wf, clip(s.body), last, b.logs(t, s.id))
		final.Store(s.id, last["status"])
	}

	// Cancel of every run: a non-terminal one is cancelled, a finished one says so.
	for _, s := range runs {
		st, _ := final.Load(s.id)
		r := b.do(t, "POST", "/api/runs/"+s.id+"/cancel", nil)
		switch st {
		case "completed", "failed":
			require.Equal(t, http.StatusConflict, r.Status, r.Raw)
			require.Equal(t, "run_finished", r.Body["error"])
		default:
			require.Equal(t, http.StatusAccepted, r.Status, "cancel of %s (%s): %s", s.id, st, r.Raw)
			got := b.waitStatus(t, s.id, "cancelled")
			require.Nil(t, got["waiting"])
			for _, a := range b.logs(t, s.id) {
				require.NotEqual(t, "running", a["status"], "run %s: an attempt left running after cancel", s.id)
			}
		}
	}
}

// rawBody is a request body sent exactly as written (doAs sends it without encoding).
type rawBody string

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func pollUntil(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f()
}

// startBody is a start request: mostly {"input": <value>}, sometimes with other members.
func startBody(rng *rand.Rand) string {
	in := jsonValue(rng, 0)
	switch rng.IntN(10) {
	case 0:
		return `{"input":` + in + `,"idempotencyKey":"` + strconv.Itoa(rng.IntN(1000)) + `"}`
	case 1:
		return `{"input":` + in + `,"input":1}` // a duplicate member
	case 2:
		return `{}`
	case 3:
		return hostile[rng.IntN(len(hostile))]
	default:
		return `{"input":` + in + `}`
	}
}

// hostile are whole bodies a careless or malicious client sends.
var hostile = []string{ //nolint:gochecknoglobals // test data
	`{"input":{"n":1e309}}`, `{"input":-1e400}`, `{"input":1e-400}`, `{"input":123456789012345678901234567890}`,
	`{"input":{"s":"\u0000"}}`, "{\"input\":\"\xff\xfe\"}", `{"input":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"input":{"n":1}} trailing`, `{"input":`, `[]`, `null`, `"input"`, `{"input":{"n":NaN}}`, `{"inptu":{"n":1}}`,
	`{"input":"\ud800"}`, `{"input":{"":{"":""}}}`, `{"input":{"n":-0}}`, `{"input":{"n":9007199254740993}}`,
}

// jsonValue is a random JSON value, leaning on the edges: numbers at float64's limits,
// unicode, empty and long strings, nesting up to the boundary's depth.
func jsonValue(rng *rand.Rand, depth int) string {
	if depth > 8 || rng.IntN(3) == 0 {
		return scalars[rng.IntN(len(scalars))]
	}
	n := rng.IntN(4)
	parts := make([]string, n)
	if rng.IntN(2) == 0 {
		for i := range parts {
			parts[i] = jsonValue(rng, depth+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	for i := range parts {
		parts[i] = fmt.Sprintf("%q:%s", keys[rng.IntN(len(keys))]+strconv.Itoa(i), jsonValue(rng, depth+1))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

var scalars = []string{ //nolint:gochecknoglobals // test data
	`0`, `-0`, `1`, `6`, `-1`, `1.5`, `1e308`, `-1.7976931348623157e308`, `5e-324`, `9007199254740992`, `-9007199254740992`,
	`0.1`, `1e-7`, `true`, `false`, `null`, `""`, `"n"`, `"é漢字🙂"`, `"\n\t\"\\"`, `"{{ input }}"`, `"` + strings.Repeat("x", 5000) + `"`,
	`{"n":7}`, `{"n":"7"}`, `{"n":null}`, `[]`, `{}`,
}

var keys = []string{"n", "s", "a-b", "with space", "ключ", "$ref", "__proto__", "constructor"} //nolint:gochecknoglobals // test data
