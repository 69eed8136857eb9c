// Package histload fills the orchestrator's tables with finished runs, as months of traffic
// would have left them: runs of 2 to 10 blocks spread over several organizations (a few large,
// many small) and several workflows each, mostly completed, some failed or cancelled, each with
// its attempts, its status log and, for some, an idempotency key. It writes with COPY, in
// chunks of runs ordered by time (ids are ULIDs of their creation time, as the service makes
// them), into the tables as they are, indexes and all, so the result is what production would
// hold. The schema must be migrated (start the system on the database once).
package histload

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Org is an organization that receives a share of the runs, on the given workflows (none:
// the loader makes up Workflows of them).
type Org struct {
	ID        string
	Share     float64
	Workflows []string
}

// Config says what to load.
type Config struct {
	Runs int
	// Orgs named by the caller (the bench's own, whose API key reads them back); the rest of the
	// share goes to made-up organizations: Large ones sharing LargeShare, Small ones sharing the
	// remainder.
	Orgs       []Org
	Large      int
	LargeShare float64
	Small      int
	Workflows  int // per made-up organization
	// Span is how far back the runs go; Until is when the newest began (zero: now minus a
	// minute).
	Span  time.Duration
	Until time.Time
	// Chunk is how many runs one COPY transaction holds; Writers how many run at once.
	Chunk   int
	Writers int
	Seed    uint64
	Log     func(format string, args ...any)
}

// Defaults fills what is unset.
func (c *Config) defaults() {
	if c.Large == 0 {
		c.Large = 3
	}
	if c.LargeShare == 0 {
		c.LargeShare = 0.6
	}
	if c.Small == 0 {
		c.Small = 200
	}
	if c.Workflows == 0 {
		c.Workflows = 6
	}
	if c.Span == 0 {
		c.Span = 180 * 24 * time.Hour
	}
	if c.Until.IsZero() {
		c.Until = time.Now().Add(-time.Minute)
	}
	if c.Chunk == 0 {
		c.Chunk = 20_000
	}
	if c.Writers == 0 {
		c.Writers = 2
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Stats is what a load wrote.
type Stats struct {
	Runs, Attempts, Statuses, Keys int64
	Took                           time.Duration
}

// org is one organization as the generator uses it.
type org struct {
	id        string
	workflows []string
	// weight of each workflow: the first ones take most runs.
	cum []float64
}

// Load writes cfg.Runs finished runs into the orchestrator schema of pool's database.
func Load(ctx context.Context, pool *pgxpool.Pool, cfg Config) (Stats, error) {
	cfg.defaults()
	if cfg.Runs <= 0 {
		return Stats{}, errors.New("histload: nothing to load")
	}
	orgs, cum, err := buildOrgs(cfg)
	if err != nil {
		return Stats{}, err
	}
	if err := storeDefinitions(ctx, pool, orgs); err != nil {
		return Stats{}, err
	}
	began := time.Now()
	var st Stats
	chunks := (cfg.Runs + cfg.Chunk - 1) / cfg.Chunk
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Writers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < cfg.Writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= chunks || ctx.Err() != nil {
					return
				}
				n := min(cfg.Chunk, cfg.Runs-k*cfg.Chunk)
				// Chunk k covers its slice of the span, oldest chunk first.
				from := cfg.Until.Add(-cfg.Span).Add(time.Duration(float64(cfg.Span) * float64(k) / float64(chunks)))
				to := cfg.Until.Add(-cfg.Span).Add(time.Duration(float64(cfg.Span) * float64(k+1) / float64(chunks)))
				g := newGen(cfg.Seed+uint64(k)*7919, orgs, cum)
				c, err := g.chunk(n, from, to)
				if err == nil {
					err = c.write(ctx, pool)
				}
				if err != nil {
					errs <- fmt.Errorf("chunk %d: %w", k, err)
					cancel()
					return
				}
				atomic.AddInt64(&st.Runs, int64(len(c.runs)))
				atomic.AddInt64(&st.Attempts, int64(len(c.attempts)))
				atomic.AddInt64(&st.Statuses, int64(len(c.statuses)))
				atomic.AddInt64(&st.Keys, int64(len(c.keys)))
				if done := atomic.LoadInt64(&st.Runs); k%10 == 0 {
					el := time.Since(began)
					cfg.Log("histload: %d of %d runs in %s (%.0f runs/s)", done, cfg.Runs, el.Round(time.Second), float64(done)/el.Seconds())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return st, err
	}
	st.Took = time.Since(began)
	return st, nil
}

// buildOrgs makes the organizations and the cumulative shares a run's organization is drawn
// from.
func buildOrgs(cfg Config) ([]org, []float64, error) {
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 99))
	var orgs []org
	var shares []float64
	named := 0.0
	for _, o := range cfg.Orgs {
		wfs := o.Workflows
		if len(wfs) == 0 {
			for range cfg.Workflows {
				wfs = append(wfs, newID("wf", time.Now(), rng))
			}
		}
		orgs = append(orgs, newOrg(o.ID, wfs))
		shares = append(shares, o.Share)
		named += o.Share
	}
	if named > 1 {
		return nil, nil, fmt.Errorf("histload: the named organizations share %.2f of the runs, more than all", named)
	}
	rest := 1 - named
	large := rest * cfg.LargeShare
	for i := range cfg.Large {
		// 1/2, 1/3, 1/6 … of the large share: a few large ones of different sizes.
		w := 1.0 / float64(i+2)
		var sum float64
		for j := range cfg.Large {
			sum += 1.0 / float64(j+2)
		}
		orgs = append(orgs, madeUp(cfg, rng))
		shares = append(shares, large*w/sum)
	}
	for range cfg.Small {
		orgs = append(orgs, madeUp(cfg, rng))
		shares = append(shares, (rest-large)/float64(cfg.Small))
	}
	cum := make([]float64, len(shares))
	var acc float64
	for i, s := range shares {
		acc += s
		cum[i] = acc
	}
	return orgs, cum, nil
}

func madeUp(cfg Config, rng *mrand.Rand) org {
	id := newID("org", time.Now(), rng)
	wfs := make([]string, cfg.Workflows)
	for i := range wfs {
		wfs[i] = newID("wf", time.Now(), rng)
	}
	return newOrg(id, wfs)
}

// newOrg weighs workflow i by 1/(i+1): a couple of busy workflows and a tail.
func newOrg(id string, wfs []string) org {
	o := org{id: id, workflows: wfs, cum: make([]float64, len(wfs))}
	var acc float64
	for i := range wfs {
		acc += 1 / float64(i+1)
		o.cum[i] = acc
	}
	for i := range o.cum {
		o.cum[i] /= acc
	}
	return o
}

// blocksOf is workflow i's number of blocks: 2 to 10, fixed per workflow.
func blocksOf(wf string) int {
	h := sha256.Sum256([]byte(wf))
	return 2 + int(h[0])%9
}

// definitionOf is workflow wf's definition: a trigger and log blocks in a chain.
func definitionOf(wf string) string {
	n := blocksOf(wf)
	var b strings.Builder
	b.WriteString(`{"blocks": [{"type": "trigger.manual", "block_id": "b0"}`)
	for k := 1; k < n; k++ {
		fmt.Fprintf(&b, `, {"type": "log", "params": {"message": "step %d of {{ input.n }}"}, "block_id": "b%d"}`, k, k)
	}
	b.WriteString(`], "edges": [`)
	for k := 1; k < n; k++ {
		if k > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"to": "b%d", "from": "b%d"}`, k, k-1)
	}
	b.WriteString(`]}`)
	return b.String()
}

func hashOf(def string) []byte {
	h := sha256.Sum256([]byte(def))
	return h[:]
}

// storeDefinitions stores each workflow's definition once (0015's run_definitions).
func storeDefinitions(ctx context.Context, pool *pgxpool.Pool, orgs []org) error {
	var o, w, d []string
	var h [][]byte
	for _, g := range orgs {
		for _, wf := range g.workflows {
			def := definitionOf(wf)
			o, w, d, h = append(o, g.id), append(w, wf), append(d, def), append(h, hashOf(def))
		}
	}
	_, err := pool.Exec(ctx, `INSERT INTO orchestrator.run_definitions (organization_id, workflow_id, hash, definition)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::jsonb[]) ON CONFLICT DO NOTHING`, o, w, h, d)
	if err != nil {
		return fmt.Errorf("histload: definitions: %w", err)
	}
	return nil
}

// gen draws runs.
type gen struct {
	rng  *mrand.Rand
	orgs []org
	cum  []float64
}

func newGen(seed uint64, orgs []org, cum []float64) *gen {
	return &gen{rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), orgs: orgs, cum: cum}
}

// chunk is the rows of a batch of runs.
type chunk struct {
	runs, attempts, statuses, keys [][]any
}

func (g *gen) pick(cum []float64) int {
	x := g.rng.Float64() * cum[len(cum)-1]
	lo, hi := 0, len(cum)-1
	for lo < hi {
		m := (lo + hi) / 2
		if cum[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// chunk makes n runs created between from and to, in time order.
func (g *gen) chunk(n int, from, to time.Time) (*chunk, error) {
	c := &chunk{runs: make([][]any, 0, n), attempts: make([][]any, 0, n*6), statuses: make([][]any, 0, n*2)}
	step := to.Sub(from) / time.Duration(n)
	trigger := `{"kind": "manual"}`
	for i := range n {
		created := from.Add(step * time.Duration(i)).Add(time.Duration(g.rng.Int64N(int64(max(step, 1)))))
		o := g.orgs[g.pick(g.cum)]
		wf := o.workflows[g.pick(o.cum)]
		blocks := blocksOf(wf)
		id := newID("run", created, g.rng)
		input := fmt.Sprintf(`{"n": %d}`, g.rng.IntN(1000))
		status := "completed"
		switch x := g.rng.Float64(); {
		case x < 0.05:
			status = "failed"
		case x < 0.07:
			status = "cancelled"
		}
		// How many blocks ran: all of a completed run, part of the others.
		ran := blocks
		if status != "completed" {
			ran = 1 + g.rng.IntN(blocks)
		}
		t := created.Add(time.Duration(1+g.rng.IntN(5)) * time.Millisecond)
		started := t
		seq := int64(1) // the running status
		const replica = "rep_histload"
		for k := range ran {
			typ, block := "log", fmt.Sprintf("b%d", k)
			if k == 0 {
				typ = "trigger.manual"
			}
			attStatus, in, out, errBody := "succeeded", fmt.Sprintf(`{"message": "step %d of %d"}`, k, 1), fmt.Sprintf(`{"message": "step %d of %d"}`, k, 1), (*string)(nil)
			if k == 0 {
				in, out = `{}`, input
			}
			last := k == ran-1
			if last && status == "failed" {
				attStatus, out = "failed", ""
				e := `{"code": "http_status", "message": "the server answered 502"}`
				errBody = &e
			}
			if last && status == "cancelled" {
				attStatus, out = "cancelled", ""
			}
			seq++
			startedSeq := seq
			seq++
			end := t.Add(time.Duration(200+g.rng.IntN(3000)) * time.Microsecond)
			var outV any
			if out != "" {
				outV = out
			}
			var errV any
			if errBody != nil {
				errV = *errBody
			}
			c.attempts = append(c.attempts, []any{newID("att", t, g.rng), id, block, typ, int32(1), attStatus, in, outV, errV, replica,
				seq, startedSeq, t, end})
			t = end
		}
		seq++
		c.statuses = append(c.statuses, []any{id, int64(1), "running", started}, []any{id, seq, status, t})
		var outV, errV any
		switch status {
		case "completed":
			outV = fmt.Sprintf(`{"message": "step %d of %d"}`, ran-1, 1)
		case "failed":
			errV = `{"block_id": "b` + fmt.Sprint(ran-1) + `", "message": "the server answered 502"}`
		}
		c.runs = append(c.runs, []any{id, o.id, wf, int32(1), hashOf(definitionOf(wf)), input, outV, errV, status, trigger,
			seq, created, started, t, t, int64(ran + 1), t})
		if g.rng.IntN(5) == 0 {
			c.keys = append(c.keys, []any{o.id, "key-" + id, id, created})
		}
	}
	return c, nil
}

var (
	runColumns     = []string{"id", "organization_id", "workflow_id", "workflow_version", "definition_hash", "input", "output", "error", "status", "trigger", "change_seq", "created_at", "started_at", "finished_at", "updated_at", "state_rev", "status_at"} //nolint:gochecknoglobals // a constant list
	attemptColumns = []string{"id", "run_id", "block_id", "type", "attempt", "status", "input", "output", "error", "replica", "seq", "started_seq", "started_at", "finished_at"}                                                                               //nolint:gochecknoglobals // a constant list
	statusColumns  = []string{"run_id", "seq", "status", "at"}                                                                                                                                                                                                 //nolint:gochecknoglobals // a constant list
	keyColumns     = []string{"organization_id", "key", "run_id", "created_at"}                                                                                                                                                                                //nolint:gochecknoglobals // a constant list
)

// write copies the chunk in one transaction.
func (c *chunk) write(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// A load is not a payment: the WAL flush at commit can wait.
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		for _, t := range []struct {
			name string
			cols []string
			rows [][]any
		}{
			{"runs", runColumns, c.runs},
			{"step_attempts", attemptColumns, c.attempts},
			{"run_statuses", statusColumns, c.statuses},
			{"idempotency_keys", keyColumns, c.keys},
		} {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"orchestrator", t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		return nil
	})
}

// crockford is the ULID alphabet, lowercase as the service writes ids.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// encodeTime is the 10 characters of a ULID's 48-bit millisecond time.
func encodeTime(ms uint64) []byte {
	out := make([]byte, 10)
	for i := 9; i >= 0; i-- {
		out[i] = crockford[ms&31]
		ms >>= 5
	}
	return out
}

// newID is prefix_ and a ULID of time t (random part from rng, or crypto/rand when nil).
func newID(prefix string, t time.Time, rng *mrand.Rand) string {
	var r [10]byte
	if rng == nil {
		_, _ = rand.Read(r[:])
	} else {
		for i := range r {
			r[i] = byte(rng.UintN(256))
		}
	}
	// 80 random bits as 16 characters.
	var b strings.Builder
	b.Grow(len(prefix) + 27)
	b.WriteString(prefix)
	b.WriteByte('_')
	b.Write(encodeTime(uint64(max(t.UnixMilli(), 0)) & (1<<48 - 1)))
	var acc uint64
	bits := 0
	for _, x := range r {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			b.WriteByte(crockford[(acc>>uint(bits))&31])
		}
	}
	return b.String()
}

// Rate is runs per second of a load.
func (s Stats) Rate() float64 {
	if s.Took <= 0 {
		return math.NaN()
	}
	return float64(s.Runs) / s.Took.Seconds()
}
