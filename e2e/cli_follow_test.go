package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// followWorkflow has a retry (flaky fails its first attempt), a sleep and a signal wait.
const followWorkflow = `{"blocks":[
	{"block_id":"start","type":"trigger.manual","params":{}},
	{"block_id":"flaky","type":"fail","params":{"message":"first try fails","fail_attempts":1}},
	{"block_id":"nap","type":"wait","params":{"duration":"300ms"}},
	{"block_id":"hold","type":"wait","params":{"signal":"go","timeout":"1h"}},
	{"block_id":"done","type":"transform","params":{"value":"{{ steps.hold.output.signal.payload }}"}}
],"edges":[{"block_id":"start","target_block_id":"flaky"},{"block_id":"flaky","target_block_id":"nap"},
	{"block_id":"nap","target_block_id":"hold"},{"block_id":"hold","target_block_id":"done"}]}`

// TestCLIFollow (issue 15, item 2): `svc run --follow` and `svc runs logs --follow` follow the
// run's event stream through the gateway, say what a run waits for and when a retry runs, let
// the test send the signal the run waits for while they follow, and exit 0 once it completed.
func TestCLIFollow(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	sys := harness.Start(t, harness.Options{TrustGateway: true})

	t.Run("RunFollowJSONLines", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, sys.BaseURL)
		c.login("cli-follow-json")
		id := c.workflow("follow-json", followWorkflow)

		f := startFollow(t, c, "run", id, "--input", `{}`, "--follow")
		first := obj(t, decodeAny(t, f.nextLine(t, func(string) bool { return true })))
		runID := first["runId"].(string)
		require.Regexp(t, `^run_`, runID)
		f.nextLine(t, func(l string) bool {
			return strings.Contains(l, `"event":"run.status"`) && strings.Contains(l, `"signal":"go"`)
		})
		c.ok("runs", "signal", runID, "--name", "go", "--payload", `{"by":"follow"}`)
		res := f.wait(t)
		require.Equal(t, 0, res.code, res)

		lines := jsonLines(t, res.stdout)
		var kinds []string
		retried, slept, signalled := false, false, false
		for _, l := range lines[1 : len(lines)-1] {
			kind, _ := l["event"].(string)
			require.NotEmpty(t, kind, "every line between the start and the run is an event: %v", l)
			require.NotEmpty(t, l["id"], "every event carries its id")
			kinds = append(kinds, kind)
			if kind == "attempt.finished" && l["block_id"] == "flaky" && l["status"] == "failed" {
				require.NotEmpty(t, l["retry_at"], "a retried attempt says when: %v", l)
				retried = true
			}
			if w, ok := l["waiting"].(map[string]any); ok {
				slept = slept || (w["kind"] == "sleep" && w["block_id"] == "nap" && w["until"] != nil)
				signalled = signalled || (w["kind"] == "signal" && w["signal"] == "go")
			}
		}
		require.True(t, retried, res.stdout)
		require.True(t, slept, res.stdout)
		require.True(t, signalled, res.stdout)
		require.Contains(t, kinds, "attempt.started")
		requireTimeOrder(t, lines[1:len(lines)-1])
		final := lines[len(lines)-1]
		require.Equal(t, runID, final["runId"])
		require.Equal(t, "completed", final["status"])
		require.Equal(t, map[string]any{"done": map[string]any{"by": "follow"}}, final["output"])
		require.Empty(t, res.stderr, "the stream was followed, not polled")
	})

	t.Run("RunFollowHuman", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, sys.BaseURL)
		c.login("cli-follow-human")
		id := c.workflow("follow-human", followWorkflow)

		f := startFollow(t, c, "run", id, "--follow", "-o", "table")
		started := f.nextLine(t, func(l string) bool { return strings.HasPrefix(l, "Started run ") })
		runID := strings.Fields(started)[2]
		f.nextLine(t, func(l string) bool { return strings.Contains(l, `run waiting: signal "go" at hold`) })
		c.ok("runs", "signal", runID, "--name", "go")
		res := f.wait(t)
		require.Equal(t, 0, res.code, res)
		for _, want := range []string{
			"flaky#1", "error: first try fails; retrying at ", "flaky#2", "succeeded",
			"run waiting: sleep at nap, until ", `times out `, "(send it: svc runs signal " + runID + " --name go)",
			"done#1", "Run " + runID + " completed.",
		} {
			require.Contains(t, res.stdout, want)
		}
	})

	t.Run("RunsLogsFollow", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, sys.BaseURL)
		c.login("cli-follow-logs")
		id := c.workflow("follow-logs", followWorkflow)
		runID := obj(t, decodeAny(t, c.ok("run", id).stdout))["runId"].(string)

		// Human form first: it waits for the signal; the JSON follow then starts on the same
		// run, resumed from the start, and both see the end.
		human := startFollow(t, c, "runs", "logs", runID, "--follow", "-o", "table")
		human.nextLine(t, func(l string) bool { return strings.Contains(l, `run waiting: signal "go" at hold`) })
		piped := startFollow(t, c, "runs", "logs", runID, "--follow")
		piped.nextLine(t, func(l string) bool { return strings.Contains(l, `"signal":"go"`) })
		c.ok("runs", "signal", runID, "--name", "go")

		h := human.wait(t)
		require.Equal(t, 0, h.code, h)
		require.Contains(t, h.stdout, "retrying at ")
		require.Contains(t, h.stdout, "Run "+runID+" completed.")
		// It began on a run under way: what had happened came at once, each line at its time.
		requireClockOrder(t, h.stdout)

		p := piped.wait(t)
		require.Equal(t, 0, p.code, p)
		lines := jsonLines(t, p.stdout)
		require.Equal(t, "run.status", lines[0]["event"], "logs has no start line: events from the first, the run queued")
		require.Equal(t, "attempt.started", lines[1]["event"])
		require.Equal(t, "completed", lines[len(lines)-1]["status"])
		var statuses []string
		for _, l := range lines {
			if l["event"] == "run.status" {
				statuses = append(statuses, l["status"].(string))
			}
		}
		require.Equal(t, []string{"queued", "running", "waiting", "running", "waiting", "running", "completed"}, statuses,
			"every status on the way, the sleep's and the signal's waits too: %s", p.stdout)
		requireTimeOrder(t, lines[:len(lines)-1])
	})

	t.Run("FailedRunExitsOne", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, bin, sys.BaseURL)
		c.login("cli-follow-fail")
		id := c.workflow("follow-fail", `{"blocks":[
			{"block_id":"start","type":"trigger.manual","params":{}},
			{"block_id":"boom","type":"fail","params":{"message":"kaboom"}}
		],"edges":[{"block_id":"start","target_block_id":"boom"}]}`)
		res := c.run("run", id, "--follow")
		require.Equal(t, 1, res.code, res)
		lines := jsonLines(t, res.stdout)
		runID := lines[0]["runId"].(string)
		require.Contains(t, res.stderr, "run "+runID+" failed: block boom: kaboom")
		var failedStatus bool
		for _, l := range lines {
			failedStatus = failedStatus || (l["event"] == "run.status" && l["status"] == "failed")
		}
		require.True(t, failedStatus, res.stdout)
		require.Equal(t, "failed", lines[len(lines)-1]["status"])
	})
}

// requireTimeOrder checks that events (JSON lines of a follow) say when they happened, in
// the order they came: a status when the run took it (statusAt), an attempt's start or end.
func requireTimeOrder(t *testing.T, events []map[string]any) {
	t.Helper()
	var last time.Time
	for _, e := range events {
		key := map[string]string{"run.status": "statusAt", "attempt.started": "startedAt", "attempt.finished": "finishedAt"}[e["event"].(string)]
		require.NotEmpty(t, key, "an event of a known kind: %v", e)
		ts, _ := e[key].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err, "%s says when (%s): %v", e["event"], key, e)
		require.False(t, at.Before(last), "%v comes after an event at %s", e, last)
		last = at
	}
}

// requireClockOrder checks that the times of day a human follow's lines begin with never go
// back (but at midnight).
func requireClockOrder(t *testing.T, out string) {
	t.Helper()
	var last time.Time
	for _, l := range strings.Split(out, "\n") {
		at, err := time.Parse("15:04:05.000", strings.SplitN(l, " ", 2)[0])
		if err != nil {
			continue // the start line, the ended run
		}
		if at.Before(last) && last.Sub(at) < 12*time.Hour {
			t.Fatalf("%q comes after a line at %s:\n%s", l, last.Format("15:04:05.000"), out)
		}
		last = at
	}
}

// followProc is a running svc whose stdout the test reads line by line while it runs.
type followProc struct {
	cmd    *exec.Cmd
	lines  chan string
	mu     sync.Mutex
	stdout strings.Builder
	stderr bytes.Buffer
	done   chan struct{}
}

func startFollow(t *testing.T, c *cliRunner, args ...string) *followProc {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.environ()
	f := &followProc{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	cmd.Stderr = &f.stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-f.done
		}
	})
	go func() {
		defer close(f.done)
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			f.mu.Lock()
			f.stdout.WriteString(sc.Text() + "\n")
			f.mu.Unlock()
			f.lines <- sc.Text()
		}
	}()
	return f
}

// nextLine reads lines until one matches (20 s at most) and returns it.
func (f *followProc) nextLine(t *testing.T, match func(string) bool) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				f.mu.Lock()
				defer f.mu.Unlock()
				t.Fatalf("svc ended before the line expected; stdout:\n%s\nstderr:\n%s", f.stdout.String(), f.stderr.String())
			}
			if match(l) {
				return l
			}
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("no line expected within 20 s; stdout:\n%s", f.stdout.String())
		}
	}
}

// wait waits for svc to end (20 s at most) and returns all it printed.
func (f *followProc) wait(t *testing.T) cliResult {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("svc did not end within 20 s; stdout:\n%s", f.stdout.String())
	}
	err := f.cmd.Wait()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{code: code, stdout: f.stdout.String(), stderr: f.stderr.String()}
}
