package run_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// FuzzInterpreter decodes the fuzz bytes into a small definition (a DAG of at most 12 blocks:
// trigger.manual, log, transform, condition, wait, fail, with branch edges out of conditions)
// and a sequence of events, and checks the interpreter's invariants after every Apply (see
// tracker.check): no panic; sequences never go back and attempt changes strictly increase; a
// terminal status never changes; Changed lists blocks of the definition, exactly those whose
// state changed; no block in flight in a terminal run; at most one Start; every attempt ended
// was begun earlier, and ends once.
//
// The events come from the simulated world of property_test.go, every choice of which is
// read from the bytes: which pending thing happens next, crashes, failed tries, stopping
// replicas, cancels, signals, replays of stale results, and events made up from the bytes
// alone (any job, try, block or attempt id).
func FuzzInterpreter(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{11, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 200, 201, 202, 203})
	// A wide fan-out of waits and failures.
	f.Add([]byte{11, 3, 0, 3, 0, 4, 0, 4, 0, 3, 1, 4, 1, 3, 2, 4, 2, 3, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 254, 253})
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 24 {
		seed := make([]byte, 40+rnd.IntN(200))
		for i := range seed {
			seed[i] = byte(rnd.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		w := newWorld(c, genDefinition(c), worldConfig{arbitrary: true, maxEvents: 2000, disruptions: c.intn(5), extras: c.intn(6)})
		if err := w.run(); err != nil {
			t.Fatal(err)
		}
	})
}

// chooser makes the random choices of a definition and of a world.
type chooser interface {
	// intn returns a number in [0, n) (0 when n <= 1).
	intn(n int) int
}

// byteChooser reads choices from fuzz bytes; once they run out every choice is 0.
type byteChooser struct{ data []byte }

func (b *byteChooser) intn(n int) int {
	if n <= 1 || len(b.data) == 0 {
		return 0
	}
	v := int(b.data[0])
	b.data = b.data[1:]
	if n > 256 && len(b.data) > 0 {
		v = v<<8 | int(b.data[0])
		b.data = b.data[1:]
	}
	return v % n
}

// randChooser makes choices with a seeded generator.
type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return c.r.IntN(n)
}

// genDefinition makes a definition of at most 12 blocks: b0 is the trigger, every other block
// has at least one incoming edge from an earlier block (so it is a DAG with nothing
// unreachable), edges out of a condition carry a branch. It returns the run to drive.
func genDefinition(c chooser) *run.Run {
	type block struct {
		ID     string         `json:"block_id"`
		Type   string         `json:"type"`
		Params map[string]any `json:"params"`
	}
	type edge struct {
		From   string `json:"block_id"`
		To     string `json:"target_block_id"`
		Branch string `json:"branch,omitempty"`
	}
	n := 1 + c.intn(12)
	blocks := []block{{ID: "b0", Type: "trigger.manual", Params: map[string]any{}}}
	var edges []edge
	branch := func(from int) string {
		if blocks[from].Type != "condition" {
			return ""
		}
		return []string{"true", "false"}[c.intn(2)]
	}
	types := []string{"log", "transform", "condition", "wait", "fail"}
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("b%d", i)
		p := c.intn(i) // the first upstream block: templates may name it
		up := blocks[p].ID
		var b block
		switch typ := types[c.intn(len(types))]; typ {
		case "log":
			b = block{id, typ, map[string]any{"message": []string{"m {{ input.n }}", "from {{ steps." + up + ".output }}", "plain", "run {{ run.id }}"}[c.intn(4)]}}
		case "transform":
			values := []any{"{{ input.n }}", map[string]any{"x": "{{ steps.b0.output }}", "y": []any{1, "two"}}, "{{ run.id }}/{{ workflow.id }}",
				"{{ steps." + up + ".output }}", json.Number("3.5"), "{{ input.n * 2 }}", "{{ input }}", "{{ input.n + }}"}
			b = block{id, typ, map[string]any{"value": values[c.intn(len(values))]}}
		case "condition":
			exprs := []string{"input.n > 5", "true", "false", "input.n % 2 == 0", "steps.b0.output.n < 3", "input.n < 7", "run.id == 'run_1'", "input.n +"}
			b = block{id, typ, map[string]any{"expression": exprs[c.intn(len(exprs))]}}
		case "wait":
			params := []map[string]any{{"duration": "1s"}, {"duration": "90s"}, {"until": "2026-11-22T03:00:00Z"}, {"until": "2020-01-01T00:00:00Z"},
				{"signal": "s1"}, {"signal": "s2"}, {"signal": "s1", "timeout": "30s"}, {"signal": "s2", "timeout": "5m"}}
			b = block{id, typ, params[c.intn(len(params))]}
		case "fail":
			// fail_attempts 0-2 recovers within the policy's 3 attempts; 3 and absent do not.
			p := map[string]any{"message": "boom {{ input.n }}"}
			if k := []int{0, 1, 2, 1, 2, 3, -1}[c.intn(7)]; k >= 0 {
				p["fail_attempts"] = k
			}
			b = block{id, typ, p}
		}
		blocks = append(blocks, b)
		edges = append(edges, edge{up, id, branch(p)})
		for j := 0; j < i; j++ {
			if j != p && c.intn(5) == 0 {
				edges = append(edges, edge{blocks[j].ID, id, branch(j)})
			}
		}
	}
	raw, err := json.Marshal(map[string]any{"blocks": blocks, "edges": edges})
	if err != nil {
		panic(err)
	}
	def, err := run.ParseDefinition(raw)
	if err != nil {
		panic(err)
	}
	return newRun(def, map[string]any{"n": c.intn(10)})
}
