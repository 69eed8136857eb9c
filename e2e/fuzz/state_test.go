package fuzz

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schemas of the system's services, whose rows a rejected request must leave alone.
var stateSchemas = []string{"identity", "editor", "orchestrator", "scheduler"} //nolint:gochecknoglobals // fixed list

// volatile are columns that change without any request: a key's last use is recorded a few
// seconds late, replicas beat their heart, and River's own tables are its queue's bookkeeping
// (its cleaner deletes finished jobs on its own clock).
func volatile(schema, table, column string) bool {
	switch {
	case strings.HasPrefix(table, "river_"), table == "replicas", strings.HasPrefix(table, "goose"):
		return true
	case table == "api_keys" && column == "last_request":
		return true
	}
	return false
}

// stateProbe fingerprints every table of the system: its row count and a hash of its rows
// (volatile columns left out).
type stateProbe struct {
	pool  *pgxpool.Pool
	query string
	names []string
}

func newStateProbe(ctx context.Context, dsn string) (*stateProbe, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT table_schema, table_name, column_name FROM information_schema.columns
		WHERE table_schema = ANY($1) ORDER BY table_schema, table_name, ordinal_position`, stateSchemas)
	if err != nil {
		pool.Close()
		return nil, err
	}
	cols := map[string][]string{}
	hasVolatile := map[string]bool{}
	for rows.Next() {
		var s, t, c string
		if err := rows.Scan(&s, &t, &c); err != nil {
			rows.Close()
			pool.Close()
			return nil, err
		}
		k := pgx.Identifier{s, t}.Sanitize()
		if volatile(s, t, c) {
			hasVolatile[k] = true
			continue
		}
		cols[k] = append(cols[k], pgx.Identifier{c}.Sanitize())
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		pool.Close()
		return nil, err
	}
	p := &stateProbe{pool: pool}
	var parts []string
	for _, k := range sortedKeys(cols) {
		// Every insert, update and delete changes the count or the sum of the row versions'
		// transaction ids (xmin), and reading xmin never reads the rows' large values (runs
		// hold inputs of up to 1 MiB). Tables with a volatile column hash their other columns
		// instead (they are small: api_keys).
		expr := "count(*)::text || ':' || coalesce(sum(xmin::text::bigint), 0)::text"
		if hasVolatile[k] {
			row := "ROW(" + strings.Join(cols[k], ", ") + ")::text"
			expr = fmt.Sprintf("count(*)::text || ':' || coalesce(md5(string_agg(%s, '|' ORDER BY %s)), '')", row, row)
		}
		parts = append(parts, fmt.Sprintf("(SELECT %s FROM %s)", expr, k))
		p.names = append(p.names, k)
	}
	if len(parts) == 0 {
		pool.Close()
		return nil, fmt.Errorf("no tables in %v", stateSchemas)
	}
	p.query = "SELECT ARRAY[" + strings.Join(parts, ", ") + "]"
	return p, nil
}

// snapshot is one fingerprint per table.
type snapshot map[string]string

func (p *stateProbe) snapshot(ctx context.Context) (snapshot, error) {
	var vals []string
	if err := p.pool.QueryRow(ctx, p.query).Scan(&vals); err != nil {
		return nil, err
	}
	s := make(snapshot, len(vals))
	for i, v := range vals {
		s[p.names[i]] = v
	}
	return s, nil
}

// diff names the tables whose fingerprint differs, with their row counts before and after.
func (s snapshot) diff(o snapshot) []string {
	var out []string
	for k, v := range s {
		if o[k] != v {
			out = append(out, fmt.Sprintf("%s rows %s -> %s", k, strings.SplitN(v, ":", 2)[0], strings.SplitN(o[k], ":", 2)[0]))
		}
	}
	sort.Strings(out)
	return out
}

// errUnsettled is quiet's answer when runs stay queued or running past its deadline.
type errUnsettled struct {
	Busy     []string // the runs still queued or running
	Changing []string // tables that kept changing
	Jobs     int      // River jobs still pending
}

func (e *errUnsettled) Error() string {
	return fmt.Sprintf("the system did not settle: runs still queued or running %v, %d jobs pending, tables changing %v", e.Busy, e.Jobs, e.Changing)
}

// reach is the schemas a request can change: its service's own, and those of the services it
// calls to do its work (a run start, a tick's dispatch, a webhook delivery reach the
// orchestrator). A path no route has may reach anything.
func reach(clean string) []string {
	switch {
	case strings.HasPrefix(clean, "/api/auth/"), clean == "/api/bootstrap":
		return []string{"identity"}
	case strings.HasPrefix(clean, "/api/webhooks/"), clean == "/api/runs", strings.HasPrefix(clean, "/api/runs/"),
		strings.HasPrefix(clean, "/api/workflows/") && (strings.HasSuffix(clean, "/run") || strings.HasSuffix(clean, "/runs")):
		return []string{"orchestrator"}
	case clean == "/api/workflows", strings.HasPrefix(clean, "/api/workflows/"), clean == "/api/connectors":
		return []string{"editor", "scheduler"}
	case clean == "/api/schedules", strings.HasPrefix(clean, "/api/schedules/"), clean == "/api/admin/tick":
		return []string{"scheduler", "orchestrator"}
	}
	return stateSchemas
}

// within keeps the differences of tables in the given schemas.
func within(diff []string, schemas []string) []string {
	var out []string
	for _, d := range diff {
		for _, s := range schemas {
			if strings.HasPrefix(d, `"`+s+`".`) {
				out = append(out, d)
			}
		}
	}
	return out
}

// quiet waits until the system stops changing by itself (runs finish, retries end): three
// equal fingerprints in a row, a poll apart, and no run queued or running but those in
// ignore (runs already reported stuck).
func (p *stateProbe) quiet(ctx context.Context, within time.Duration, ignore []string) (snapshot, error) {
	deadline := time.Now().Add(within)
	var last snapshot
	same := 0
	for {
		s, err := p.snapshot(ctx)
		if err != nil {
			return nil, err
		}
		var busy []string
		if err := p.pool.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM orchestrator.runs
			WHERE status IN ('queued', 'running') AND NOT id = ANY($1)`, ignore).Scan(&busy); err != nil {
			return nil, err
		}
		// River's jobs are the engine's pending work: a retry backing off, a step about to
		// start. The system is still only when none is left (once the runs reported stuck
		// are left out, their jobs may stay).
		var jobs int
		if len(ignore) == 0 {
			if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.river_job
				WHERE state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`).Scan(&jobs); err != nil {
				jobs = 0 // River's table is the engine's business: without it, runs alone decide
			}
		}
		if last != nil && len(last.diff(s)) == 0 && len(busy) == 0 && jobs == 0 {
			same++
		} else {
			same = 0
		}
		if same >= 2 {
			return s, nil
		}
		if time.Now().After(deadline) {
			var changing []string
			if last != nil {
				changing = last.diff(s)
			}
			return s, &errUnsettled{Busy: busy, Changing: changing, Jobs: jobs}
		}
		last = s
		time.Sleep(100 * time.Millisecond) // a poll interval, not a wait for a state
	}
}

// runRow is what the database holds of a run, for a report.
func (p *stateProbe) runRow(ctx context.Context, id string) string {
	var status, input, trigger string
	var created time.Time
	err := p.pool.QueryRow(ctx, `SELECT status, left(input::text, 300), trigger::text, created_at FROM orchestrator.runs WHERE id = $1`, id).
		Scan(&status, &input, &trigger, &created)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("status %s since %s, input %s, trigger %s", status, created.UTC().Format(time.RFC3339), input, trigger)
}
