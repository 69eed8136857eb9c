// Command devstack runs the whole svc system on this machine. It finds or starts Postgres and
// Redis, builds every service, starts each one as a child process with one shared
// configuration, prints the base URL, and on Ctrl-C stops everything it started. `make run`
// calls it; run it by hand as `go run ./tools/devstack` from the repository root.
//
// Usage:
//
//	devstack [-no-build] [-only gateway,identity] [-root DIR] [-health-timeout 60s] [-stop-timeout 15s]
//
// It reads SVC_DATABASE_URL, SVC_REDIS_URL, SVC_INTERNAL_SECRET (unset, it generates one once
// and keeps it in .devstack/internal-secret) and every SVC_*_ADDR and SVC_*_URL of the
// services; it passes its whole environment on to the services, so any other SVC_* or OTEL_*
// setting exported before it reaches every one of them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"svc.dev/tools/internal/workspace"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := parseConfig(os.Args[1:], os.Environ(), os.Getwd)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(2)
	}
	giveBack := takeForeground()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, log, os.Stdout)
	stop()
	giveBack()
	if err != nil {
		log.Error("devstack stopped", "err", err)
		os.Exit(1)
	}
}

// config is everything devstack reads from its flags, its environment and the machine.
type config struct {
	root          string        // repository root: holds go.work, services/ and .devstack/
	stateDir      string        // <root>/.devstack: binaries, the kept secret, private Postgres and Redis
	noBuild       bool          // use the binaries of an earlier build
	only          []string      // start only these services; empty means all
	healthTimeout time.Duration // how long the services together may take to answer /health
	stopTimeout   time.Duration // how long a child may take to stop before it is killed
	env           []string      // devstack's environment, read once, passed to every child

	// What the machine offers; tests point these elsewhere.
	postgresAddr string                       // the standard local Postgres
	redisAddr    string                       // the standard local Redis
	postgresGlob string                       // where Debian installs PostgreSQL versions
	lookPath     func(string) (string, error) // finds programs on PATH
}

// parseConfig reads the flags once. getwd finds the repository root when -root is not given.
func parseConfig(args, environ []string, getwd func() (string, error)) (config, error) {
	cfg := config{
		env:          environ,
		postgresAddr: "127.0.0.1:5432",
		redisAddr:    "127.0.0.1:6379",
		postgresGlob: "/usr/lib/postgresql/*/bin",
		lookPath:     exec.LookPath,
	}
	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	fs.BoolVar(&cfg.noBuild, "no-build", false, "use the binaries in .devstack/bin instead of building them")
	only := fs.String("only", "", "comma-separated services to start (default: all)")
	fs.StringVar(&cfg.root, "root", "", "repository root (default: the nearest directory above the working directory with go.work)")
	fs.DurationVar(&cfg.healthTimeout, "health-timeout", 60*time.Second, "how long the services may take to answer /health")
	fs.DurationVar(&cfg.stopTimeout, "stop-timeout", 15*time.Second, "how long a child may take to stop before it is killed")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for name := range strings.SplitSeq(*only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.only = append(cfg.only, name)
		}
	}
	if cfg.root == "" {
		wd, err := getwd()
		if err != nil {
			return config{}, err
		}
		root, err := workspace.Root(wd)
		if err != nil {
			return config{}, fmt.Errorf("%s: run devstack from the repository or pass -root: %w", wd, err)
		}
		cfg.root = root
	}
	root, err := filepath.Abs(cfg.root)
	if err != nil {
		return config{}, err
	}
	cfg.root = root
	cfg.stateDir = filepath.Join(root, ".devstack")
	return cfg, nil
}

// run brings the system up, waits for Ctrl-C or a crash, and takes it down again. It returns
// nil after an orderly stop and an error when something failed; every exit path stops what
// was started, in reverse order, through the defers.
func run(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) (err error) {
	out := &lockedWriter{w: stdout}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// stopCtx bounds each stop step. It outlives ctx, which is already cancelled on Ctrl-C.
	stopCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), cfg.stopTimeout)
	}
	// A child that needed SIGKILL is worth a warning, not a failed exit: killing it after the
	// deadline is part of stopping.
	var unsure []string // stop steps that reported a problem (a child killed, a server that would not stop)
	stopStep := func(what string, stop func(context.Context) error) {
		sctx, cancel := stopCtx()
		defer cancel()
		if serr := stop(sctx); serr != nil {
			log.Warn("stop", "what", what, "err", serr)
			unsure = append(unsure, what)
		}
	}
	// Ctrl-C is a request, not a failure, also during start-up: the step it interrupts fails
	// because of it (a wait ends; a build or initdb, which the terminal signals too, dies).
	// Registered first, this runs last, once every stop step has run.
	defer func() {
		if err != nil && ctx.Err() != nil {
			log.Debug("interrupted", "err", err)
			err = nil
		}
		switch {
		case err == nil && len(unsure) == 0:
			say("devstack stopped: every process it started has exited")
		case err == nil:
			say("devstack stopped; stopping %s reported a problem (see the warnings above)", strings.Join(unsure, ", "))
		}
	}()

	// --------------------------------------------------------------------------------------
	// Settings, checked before anything is started so a typo costs no time.

	env := envMap(cfg.env)
	selected, err := selectServices(cfg.only)
	if err != nil {
		return err
	}
	eps, err := resolveEndpoints(env)
	if err != nil {
		return err
	}
	for _, s := range selected {
		if perr := checkPortFree(eps.addr[s.name]); perr != nil {
			return fmt.Errorf("%s cannot listen on %s=%s: %w (is an earlier run still up? set %s to move it)",
				s.name, s.addrEnv, eps.addr[s.name], perr, s.addrEnv)
		}
	}
	if slices.ContainsFunc(selected, func(s service) bool { return s.name == "gateway" }) {
		if perr := checkPortFree(eps.gatewayAdmin); perr != nil {
			return fmt.Errorf("gateway cannot listen on %s=%s: %w (set %s to move it)",
				envGatewayAdminAddr, eps.gatewayAdmin, perr, envGatewayAdminAddr)
		}
	}
	// Where devstack probes each service, and the URL humans get; derived now so that an
	// address with no fixed port fails before anything starts.
	probeURL := map[string]string{}
	for _, s := range selected {
		u, perr := dialURL(eps.addr[s.name], "127.0.0.1")
		if perr != nil {
			return fmt.Errorf("%s: %w", s.addrEnv, perr)
		}
		probeURL[s.name] = u
	}
	publicURL, err := baseURL(eps.addr["gateway"])
	if err != nil {
		return fmt.Errorf("SVC_PUBLIC_ADDR: %w", err)
	}
	// Last of the checks: a run that stops at a typo writes no secret.
	secret, err := internalSecret(env, cfg.stateDir)
	if err != nil {
		return err
	}
	width := len("postgres")
	for _, s := range selected {
		width = max(width, len(s.name))
	}
	sup := newSupervisor(log, out, width)

	// --------------------------------------------------------------------------------------
	// Postgres and Redis.

	db, err := resolvePostgres(ctx, cfg, env, sup, log)
	if err != nil {
		return err
	}
	defer stopStep("postgres", db.close)
	say("postgres: %s", db.source)

	rd, err := resolveRedis(ctx, cfg, env, sup, log)
	if err != nil {
		return err
	}
	defer stopStep("redis", rd.close)
	if rd.embedded {
		say("redis:    NO REDIS SERVER FOUND, using an embedded miniredis (%s); install redis-server "+
			"(apt-get install redis-server) or set %s for the real thing", rd.url, envRedisURL)
	} else {
		say("redis:    %s", rd.source)
	}

	// --------------------------------------------------------------------------------------
	// Binaries.

	binDir := filepath.Join(cfg.stateDir, "bin")
	names := make([]string, 0, len(selected))
	for _, s := range selected {
		names = append(names, s.name)
	}
	if cfg.noBuild {
		if err := checkBinaries(binDir, names); err != nil {
			return err
		}
		say("using existing binaries in %s", binDir)
	} else {
		goBin, err := goBinary(cfg.lookPath, env)
		if err != nil {
			return err
		}
		version := buildVersion(ctx, cfg.root)
		say("building %d services (version %s) ...", len(names), version)
		if err := buildServices(ctx, goBin, cfg.root, binDir, version, names, cfg.env, 2, out); err != nil {
			return err
		}
	}

	// --------------------------------------------------------------------------------------
	// Services: backends, then the gateway once the backends answer.

	overrides := map[string]string{
		envDatabaseURL:    db.url,
		envRedisURL:       rd.url,
		envInternalSecret: secret.value,
	}
	for k, v := range eps.vars {
		overrides[k] = v
	}
	// Identity trusts the public base URL's origin for mutating auth calls; when the gateway
	// moves, the origin moves with it unless the user named one.
	if _, ok := env["SVC_PUBLIC_URL"]; !ok {
		overrides["SVC_PUBLIC_URL"] = publicURL
	}
	// A development stack has no mail: identity writes reset and invitation links to its log
	// instead (by default it sends nothing and logs no link), unless the user chose.
	if _, ok := env["SVC_MAIL"]; !ok {
		overrides["SVC_MAIL"] = "log"
	}
	childEnv := mergeEnv(cfg.env, overrides)
	switch {
	case secret.fresh:
		say("%s: generated a random one, kept in %s for the next runs", envInternalSecret, secret.file)
	case secret.file != "":
		say("%s: the one kept in %s (sessions and saved logins stay valid)", envInternalSecret, secret.file)
	}

	client := &http.Client{Timeout: 2 * time.Second}
	healthCtx, cancelHealth := context.WithTimeout(ctx, cfg.healthTimeout)
	defer cancelHealth()

	// startTier starts a group of services at once and waits until each answers /health. It
	// returns what it started even on error, so the caller can stop it.
	startTier := func(tier []service) ([]*process, error) {
		procs := make([]*process, 0, len(tier))
		for _, s := range tier {
			p, err := sup.start(procSpec{
				name: s.name,
				path: filepath.Join(binDir, s.name),
				env:  childEnv,
				dir:  cfg.root,
			})
			if err != nil {
				return procs, err
			}
			procs = append(procs, p)
		}
		for i, s := range tier {
			base := probeURL[s.name]
			version, err := waitHealthy(healthCtx, client, base, procs[i], sup.Failed())
			if err != nil {
				if serr := sup.Err(); serr != nil {
					return procs, serr // the crash is the news, not the wait it interrupted
				}
				return procs, err
			}
			say("%s is healthy on %s (version %s)", s.name, base, version)
		}
		return procs, nil
	}

	var backends, front []service
	for _, s := range selected {
		if s.urlEnv == "" {
			front = append(front, s)
		} else {
			backends = append(backends, s)
		}
	}
	backendProcs, err := startTier(backends)
	defer stopStep("services", func(ctx context.Context) error { return stopAll(ctx, backendProcs) })
	if err != nil {
		return err
	}
	// Deferred after the backends, so it runs before them: the gateway stops taking requests
	// before the services behind it go away.
	gatewayProcs, err := startTier(front)
	defer stopStep("gateway", func(ctx context.Context) error { return stopAll(ctx, gatewayProcs) })
	if err != nil {
		return err
	}
	cancelHealth()

	// --------------------------------------------------------------------------------------
	// Up: wait for Ctrl-C or a crash.

	if len(front) > 0 {
		say("svc is up: %s", publicURL)
		if probes, perr := baseURL(eps.gatewayAdmin); perr == nil {
			say("gateway probes and metrics: %s/ready, %s/metrics", probes, probes)
		}
	} else {
		say("services are up (no gateway started): %s", serviceNames(selected))
	}
	say("press Ctrl-C to stop")

	select {
	case <-ctx.Done():
		say("stopping ...")
		return nil
	case <-sup.Failed():
		return sup.Err()
	}
}
