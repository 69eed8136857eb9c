// Command load fills the orchestrator's database with finished runs (package histload), to
// measure the system on a database that holds months of history:
//
//	go run ./tools/bench/load -database-url postgres://…/svc -runs 5000000
//
// The database's schema must be migrated: start the system on it once first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/tools/bench/histload"
)

func main() {
	cfg := histload.Config{Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }}
	url := flag.String("database-url", os.Getenv("SVC_DATABASE_URL"), "the system's database (default $SVC_DATABASE_URL)")
	flag.IntVar(&cfg.Runs, "runs", 5_000_000, "finished runs to write")
	flag.IntVar(&cfg.Large, "large", 3, "large organizations")
	flag.IntVar(&cfg.Small, "small", 200, "small organizations")
	flag.IntVar(&cfg.Workflows, "workflows", 6, "workflows per organization")
	flag.IntVar(&cfg.Writers, "writers", 2, "COPY transactions at once")
	flag.IntVar(&cfg.Chunk, "chunk", 20_000, "runs per COPY transaction")
	orgs := flag.String("org", "", "comma-separated id=share[:wf1/wf2…] of organizations that exist (their API keys read the runs back)")
	flag.DurationVar(&cfg.Span, "span", 0, "how far back the runs go (default 180 days)")
	flag.Parse()
	for o := range strings.SplitSeq(*orgs, ",") {
		if o == "" {
			continue
		}
		var org histload.Org
		id, rest, _ := strings.Cut(o, "=")
		share, wfs, _ := strings.Cut(rest, ":")
		if _, err := fmt.Sscan(share, &org.Share); err != nil {
			fmt.Fprintln(os.Stderr, "load: -org:", err)
			os.Exit(2)
		}
		org.ID = id
		if wfs != "" {
			org.Workflows = strings.Split(wfs, "/")
		}
		cfg.Orgs = append(cfg.Orgs, org)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	defer pool.Close()
	st, err := histload.Load(ctx, pool, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	fmt.Printf("loaded %d runs, %d attempts, %d statuses, %d idempotency keys in %s: %.0f runs/s\n",
		st.Runs, st.Attempts, st.Statuses, st.Keys, st.Took.Round(1e9), st.Rate())
}
