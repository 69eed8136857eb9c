// Command bench measures the svc system under load and appends the numbers to
// bench/RESULTS.md, beside a pgbench baseline taken in the same run (tools/bench/pgbench-step.sh:
// the least a durable step commits, measured on this machine now). It starts
// the system itself with devstack on ports of its own, so a `make run` on the default ports is
// never disturbed, unless -no-system points it at one that already runs.
//
// Usage:
//
//	bench [-scenario gateway-proxy,guard-reject] [-duration 10s] [-rate 500]
//	      [-scenario-rate patch-100-ops=50,patch-1000-blocks=20]
//	      [-no-system -url http://127.0.0.1:8080 -identity-url http://127.0.0.1:8081
//	       -editor-url http://127.0.0.1:8082 -origin http://localhost:8080]
//	      [-results bench/RESULTS.md] [-no-baseline]
//
// Every scenario runs at -rate, except that one with a rate of its own (the patch scenarios:
// their requests are heavier) keeps it unless -rate is given; -scenario-rate sets one
// scenario's rate whatever else is given.
//
// The system bench starts trusts the Origin http://bench.test, has a rate limit high enough
// that no bucket empties during a run, and gets a fresh SVC_INTERNAL_SECRET that bench keeps,
// so it can sign requests straight to a service as the gateway does. With -no-system, bench
// signs with the SVC_INTERNAL_SECRET of its own environment, which must be the system's.
//
// `make bench` calls it; run it by hand as `go run ./tools/bench` from the repository root.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"svc.dev/tools/internal/workspace"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getwd)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Where the system bench starts listens: away from the default ports of `make run`.
const (
	ownGatewayURL  = "http://127.0.0.1:18080"
	ownIdentityURL = "http://127.0.0.1:18081"
	ownEditorURL   = "http://127.0.0.1:18082"
	// defaultDatabaseURL is the database devstack uses when SVC_DATABASE_URL is not set.
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/svc?sslmode=disable"
	// benchOrigin is the Origin of bench's auth calls; the system it starts trusts it.
	benchOrigin = "http://bench.test"
)

// config is everything bench reads from its flags and the machine.
type config struct {
	root        string             // repository root: holds go.work and tools/bench/pgbench-step.sh
	scenarios   []Scenario         // what to run, in order
	duration    time.Duration      // each measured phase
	warmup      time.Duration      // before each measured phase, not recorded
	rate        float64            // requests per second of every phase
	rateGiven   bool               // -rate was on the command line: it beats a scenario's own rate
	rates       map[string]float64 // -scenario-rate: per scenario, beats everything
	maxInFlight int                // bound on concurrent requests of the load generator
	noSystem    bool               // target a running system instead of starting one
	gatewayURL  string
	identityURL string
	editorURL   string
	origin      string // trusted by identity
	resultsPath string // absolute
	noBaseline  bool
	startupWait time.Duration // how long devstack may take to build and start everything
	slowLog     string        // -slow-log: file the slow requests are listed in; empty for none
	slowOver    time.Duration // what counts as slow there
	stopWait    time.Duration // how long devstack may take to stop
	databaseURL string        // the system's database, for the scenarios that measure its tables
	depthRuns   int           // -depth-runs: the finished runs the depth scenario loads
	sweepRuns   int           // -sweep-runs: the expired runs the sweep scenario loads
	chainPoll   time.Duration // -chain-poll: how often the sequential chains poll their run
}

// parseConfig reads the flags once. getwd finds the repository root.
func parseConfig(args []string, getwd func() (string, error)) (config, error) {
	cfg := config{warmup: 2 * time.Second, maxInFlight: 256}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	names := fs.String("scenario", "", "comma-separated scenarios to run (default: all: "+strings.Join(scenarioNames(allScenarios()), ",")+")")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "length of each measured phase (after a 2s warm-up)")
	fs.Float64Var(&cfg.rate, "rate", 500, "requests per second, sent open-loop on a fixed schedule")
	rates := fs.String("scenario-rate", "", "comma-separated name=rate pairs: the rate of one scenario, whatever -rate says (patch-100-ops and patch-1000-blocks have 50 and 20 of their own)")
	fs.BoolVar(&cfg.noSystem, "no-system", false, "do not start the system; target the one at -url")
	fs.StringVar(&cfg.gatewayURL, "url", "", "gateway base URL with -no-system (default http://127.0.0.1:8080, as `make run` uses)")
	fs.StringVar(&cfg.identityURL, "identity-url", "", "identity base URL with -no-system (default http://127.0.0.1:8081)")
	fs.StringVar(&cfg.editorURL, "editor-url", "", "workflow-editor base URL with -no-system (default http://127.0.0.1:8082)")
	fs.StringVar(&cfg.origin, "origin", "", "an Origin identity trusts, with -no-system (default http://localhost:8080, identity's default SVC_PUBLIC_URL)")
	results := fs.String("results", filepath.Join("bench", "RESULTS.md"), "file the run is appended to; relative to the repository root")
	fs.BoolVar(&cfg.noBaseline, "no-baseline", false, "skip the pgbench baseline (tools/bench/pgbench-step.sh)")
	fs.StringVar(&cfg.slowLog, "slow-log", "", "file to list every measured request slower than -slow-over in, with the time it was scheduled (to set a tail beside other logs)")
	fs.DurationVar(&cfg.slowOver, "slow-over", 15*time.Millisecond, "what -slow-log counts as slow")
	fs.DurationVar(&cfg.startupWait, "startup-timeout", 5*time.Minute, "how long the system may take to build and answer /health")
	fs.StringVar(&cfg.databaseURL, "database-url", cmp.Or(os.Getenv("SVC_DATABASE_URL"), defaultDatabaseURL),
		"the system's Postgres database (run-bytes and depth read the orchestrator's tables there; default $SVC_DATABASE_URL, else devstack's)")
	fs.IntVar(&cfg.depthRuns, "depth-runs", 5_000_000, "finished runs the depth scenario loads between its empty and its loaded measurements")
	fs.DurationVar(&cfg.chainPoll, "chain-poll", 2*time.Millisecond, "how often chain-40, chain-400, chain-40-10ms and chain-40-http poll GET /api/runs/:id of the run they wait for")
	fs.IntVar(&cfg.sweepRuns, "sweep-runs", 1_000_000, "finished runs the sweep scenario loads for its organization, all past the period it then sets")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if cfg.chainPoll <= 0 {
		return config{}, fmt.Errorf("-chain-poll must be positive, got %s", cfg.chainPoll)
	}
	if cfg.duration <= 0 {
		return config{}, fmt.Errorf("-duration must be positive, got %s", cfg.duration)
	}
	if cfg.rate <= 0 {
		return config{}, fmt.Errorf("-rate must be positive, got %g", cfg.rate)
	}
	fs.Visit(func(f *flag.Flag) { cfg.rateGiven = cfg.rateGiven || f.Name == "rate" })
	scenarios, err := selectScenarios(allScenarios(), *names)
	if err != nil {
		return config{}, err
	}
	cfg.scenarios = scenarios
	if cfg.rates, err = parseRates(allScenarios(), *rates); err != nil {
		return config{}, err
	}

	switch {
	case cfg.noSystem:
		cfg.gatewayURL = cmp.Or(cfg.gatewayURL, "http://127.0.0.1:8080")
		cfg.identityURL = cmp.Or(cfg.identityURL, "http://127.0.0.1:8081")
		cfg.editorURL = cmp.Or(cfg.editorURL, "http://127.0.0.1:8082")
		cfg.origin = cmp.Or(cfg.origin, "http://localhost:8080")
	case cfg.gatewayURL != "" || cfg.identityURL != "" || cfg.editorURL != "" || cfg.origin != "":
		return config{}, errors.New("-url, -identity-url, -editor-url and -origin need -no-system: bench starts its own system otherwise")
	default:
		cfg.gatewayURL, cfg.identityURL, cfg.editorURL = ownGatewayURL, ownIdentityURL, ownEditorURL
		cfg.origin = benchOrigin
	}
	cfg.gatewayURL = strings.TrimRight(cfg.gatewayURL, "/")
	cfg.identityURL = strings.TrimRight(cfg.identityURL, "/")
	cfg.editorURL = strings.TrimRight(cfg.editorURL, "/")
	// Devstack gives each child 15s to stop, gateway first, then the backends together, then
	// Postgres and Redis: a minute covers the worst case before bench kills what is left.
	cfg.stopWait = time.Minute

	wd, err := getwd()
	if err != nil {
		return config{}, err
	}
	root, err := workspace.Root(wd)
	if err != nil {
		return config{}, fmt.Errorf("%s: run bench from the repository: %w", wd, err)
	}
	cfg.root = root
	cfg.resultsPath = *results
	if !filepath.IsAbs(cfg.resultsPath) {
		cfg.resultsPath = filepath.Join(root, cfg.resultsPath)
	}
	return cfg, nil
}

// run takes the baseline, brings the system up (unless told not to), runs every scenario,
// takes the system down and appends the run to the results file. An interrupted run writes
// nothing: a half-measured section would sit in the file looking like a real one.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	began := time.Now()
	say := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	// Registered first so it runs last, after the system has stopped.
	defer func() { say("whole run took %s", time.Since(began).Round(time.Second)) }()
	// The commit is read now, as devstack builds it: others may commit while the run lasts.
	commit := gitCommit(ctx, cfg.root)

	// --------------------------------------------------------------------------------------
	// The system under test.

	var secret string
	if cfg.noSystem {
		secret = os.Getenv("SVC_INTERNAL_SECRET")
		if err := probeOK(ctx, &http.Client{Timeout: 2 * time.Second}, cfg.gatewayURL+"/health", nil); err != nil {
			return fmt.Errorf("-no-system: %s/health: %w", cfg.gatewayURL, err)
		}
	} else {
		if secret, err = newSecret(); err != nil {
			return err
		}
		say("starting the system with devstack (gateway %s) ...", cfg.gatewayURL)
		sys, serr := startSystem(ctx, systemSpec{
			root:      cfg.root,
			env:       withEnv(os.Environ(), map[string]string{"SVC_INTERNAL_SECRET": secret}),
			healthURL: cfg.gatewayURL + "/health",
			timeout:   cfg.startupWait,
			output:    stderr,
		})
		if serr != nil {
			return fmt.Errorf("start the system: %w", serr)
		}
		defer func() {
			say("stopping the system ...")
			if serr := sys.stop(cfg.stopWait); serr != nil {
				err = errors.Join(err, fmt.Errorf("stop the system: %w", serr))
			}
		}()
		say("system is up after %s", time.Since(began).Round(100*time.Millisecond))
	}

	// --------------------------------------------------------------------------------------
	// Baseline: the physical limit of a durable step on this machine, now.

	var baseline baselineResult
	if cfg.noBaseline {
		baseline.note = "skipped (-no-baseline)"
	} else {
		script := filepath.Join(cfg.root, "tools", "bench", "pgbench-step.sh")
		say("baseline: %s (clients 1 and 4, 10 s each) ...", script)
		baseline, err = runBaseline(ctx, script, []string{"1", "4"}, 10*time.Second)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		if baseline.note != "" {
			say("baseline %s", baseline.note)
		}
		for _, l := range baseline.lines {
			say("%s", l)
		}
	}

	// --------------------------------------------------------------------------------------
	// Scenarios.

	gen := NewGenerator(newHTTPClient(cfg.maxInFlight), cfg.maxInFlight)
	if cfg.slowLog != "" {
		f, err := os.Create(cfg.slowLog)
		if err != nil {
			return fmt.Errorf("slow log: %w", err)
		}
		defer f.Close() //nolint:errcheck // a diagnostic; the report is written on its own
		gen.slow = &slowLog{w: f, over: cfg.slowOver}
	}
	env := Env{
		GatewayURL:     cfg.gatewayURL,
		IdentityURL:    cfg.identityURL,
		EditorURL:      cfg.editorURL,
		InternalSecret: secret,
		Origin:         cfg.origin,
		Warmup:         cfg.warmup,
		Duration:       cfg.duration,
		Generator:      gen,
		CPU:            newCPUMeter(ctx),
		Baseline:       baseline.lines,
		Log:            say,
		DatabaseURL:    cfg.databaseURL,
		DepthRuns:      cfg.depthRuns,
		SweepRuns:      cfg.sweepRuns,
		ChainPoll:      cfg.chainPoll,
	}
	var results []Result
	var failures []error
	for _, s := range cfg.scenarios {
		env.Rate = cfg.rateFor(s)
		env.Earlier = slices.Clone(results)
		say("scenario %s at %g/s ...", s.Name(), env.Rate)
		res, serr := s.Run(ctx, env)
		results = append(results, res...)
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted during %s; nothing written", s.Name())
		}
		if serr != nil {
			say("scenario %s failed: %v", s.Name(), serr)
			failures = append(failures, fmt.Errorf("%s: %w", s.Name(), serr))
		}
	}

	// --------------------------------------------------------------------------------------
	// Report.

	rep := report{
		when:     time.Now().UTC(),
		commit:   commit,
		machine:  readMachine(),
		setup:    describeSetup(cfg),
		baseline: baseline,
		results:  results,
		failures: failures,
	}
	fmt.Fprintln(stdout)
	if _, werr := io.WriteString(stdout, rep.table()); werr != nil {
		return werr
	}
	if werr := appendReport(cfg.resultsPath, rep); werr != nil {
		return fmt.Errorf("write results: %w", werr)
	}
	say("appended to %s", cfg.resultsPath)
	return errors.Join(failures...)
}

// describeSetup is the line of the report that says how the numbers were taken.
func describeSetup(cfg config) string {
	target := "system started by bench (devstack, ports 1808x)"
	if cfg.noSystem {
		target = "running system at " + cfg.gatewayURL
	}
	return fmt.Sprintf("open loop, %s warm-up + %s measured per phase, at most %d requests in flight; %s",
		cfg.warmup, cfg.duration, cfg.maxInFlight, target)
}

// rateFor is the rate s runs at: its -scenario-rate, else -rate if given, else its own, else
// -rate's default.
func (cfg config) rateFor(s Scenario) float64 {
	if r, ok := cfg.rates[s.Name()]; ok {
		return r
	}
	if r, ok := s.(rated); ok && !cfg.rateGiven {
		return r.DefaultRate()
	}
	return cfg.rate
}

// parseRates reads -scenario-rate: "name=rate,name=rate", every name a known scenario and every
// rate positive.
func parseRates(all []Scenario, list string) (map[string]float64, error) {
	rates := map[string]float64{}
	for pair := range strings.SplitSeq(list, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("-scenario-rate: %q is not name=rate", pair)
		}
		if !slices.ContainsFunc(all, func(s Scenario) bool { return s.Name() == name }) {
			return nil, fmt.Errorf("-scenario-rate: unknown scenario %q (known: %s)", name, strings.Join(scenarioNames(all), ", "))
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return nil, fmt.Errorf("-scenario-rate: the rate of %s must be a positive number, got %q", name, value)
		}
		rates[name] = r
	}
	return rates, nil
}

// newSecret is a fresh SVC_INTERNAL_SECRET for the system bench starts: 32 random bytes, hex.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate SVC_INTERNAL_SECRET: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// scenarioNames lists the names of scenarios, for help texts and errors.
func scenarioNames(all []Scenario) []string {
	names := make([]string, 0, len(all))
	for _, s := range all {
		names = append(names, s.Name())
	}
	return names
}

// selectScenarios returns the scenarios named in list (all when it is empty), in the order
// given, and fails on a name it does not know before anything has started.
func selectScenarios(all []Scenario, list string) ([]Scenario, error) {
	var picked []Scenario
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name() == name })
		if i < 0 {
			return nil, fmt.Errorf("-scenario: unknown scenario %q (known: %s)", name, strings.Join(scenarioNames(all), ", "))
		}
		if !slices.Contains(picked, all[i]) {
			picked = append(picked, all[i])
		}
	}
	if len(picked) == 0 {
		return slices.DeleteFunc(slices.Clone(all), byNameOnly), nil
	}
	return picked, nil
}

// byNameOnly reports whether s runs only when -scenario names it (depth: it loads millions of
// runs into the system's database).
func byNameOnly(s Scenario) bool {
	o, ok := s.(interface{ ByNameOnly() bool })
	return ok && o.ByNameOnly()
}
