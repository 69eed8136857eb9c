package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// databaseName is the one database every service shares; each owns a schema inside it.
const databaseName = "svc"

// database is the Postgres the services use, and how to let go of it.
type database struct {
	url    string
	source string                          // for humans: where it came from
	close  func(ctx context.Context) error // stops a server devstack started; no-op otherwise
}

// resolvePostgres finds a Postgres in the order the architecture promises: SVC_DATABASE_URL,
// then the standard local server, then a private server started from the installed binaries.
func resolvePostgres(ctx context.Context, cfg config, env map[string]string, sup *supervisor, log *slog.Logger) (*database, error) {
	noop := func(context.Context) error { return nil }

	if u, ok := env[envDatabaseURL]; ok {
		if err := pingPostgres(ctx, u, 5*time.Second); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%s does not answer (%s): %w", envDatabaseURL, redactURL(u), err)
		}
		return &database{url: u, source: envDatabaseURL, close: noop}, nil
	}

	local := postgresURL(cfg.postgresAddr, "postgres")
	err := pingPostgres(ctx, local, 2*time.Second)
	if err == nil {
		if err := ensureDatabase(ctx, local, databaseName); err != nil {
			return nil, fmt.Errorf("local Postgres on %s: %w", cfg.postgresAddr, err)
		}
		return &database{
			url:    postgresURL(cfg.postgresAddr, databaseName),
			source: "local server on " + cfg.postgresAddr + " (database " + databaseName + ")",
			close:  noop,
		}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// A server that answers but refuses user postgres without a password is not usable either;
	// a private one on another port does not disturb it.
	log.Info("no usable Postgres on the standard port", "addr", cfg.postgresAddr, "err", err)

	bins, err := findPostgresBinaries(cfg.lookPath, cfg.postgresGlob)
	if err != nil {
		return nil, fmt.Errorf("no PostgreSQL found: nothing answers on %s and %w; "+
			"install it (apt-get install postgresql), start one on %s, or set %s",
			cfg.postgresAddr, err, cfg.postgresAddr, envDatabaseURL)
	}
	return startPrivatePostgres(ctx, bins, filepath.Join(cfg.stateDir, "postgres"), sup, log)
}

// postgresURL addresses a trust-auth server as user postgres.
func postgresURL(addr, db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     addr,
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// redactURL hides a password so that error messages can show which server was meant.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "unparsable URL"
	}
	return u.Redacted()
}

func pingPostgres(ctx context.Context, connURL string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

// ensureDatabase creates name on the server unless it exists. CREATE DATABASE cannot run in the
// database it creates, so adminURL points at the maintenance database `postgres`.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: a parallel run made it
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// postgresBinaries are the programs of one installed PostgreSQL version.
type postgresBinaries struct {
	initdb   string
	postgres string
	pgCtl    string // optional: without it the server is stopped by signal
}

// findPostgresBinaries looks on PATH first, then in Debian's versioned directories, newest
// version first. initdb and postgres must come from the same place: a data directory made by
// one major version does not start with another.
func findPostgresBinaries(lookPath func(string) (string, error), glob string) (postgresBinaries, error) {
	initdb, errInit := lookPath("initdb")
	postgres, errPG := lookPath("postgres")
	if errInit == nil && errPG == nil {
		b := postgresBinaries{initdb: initdb, postgres: postgres}
		if p, err := lookPath("pg_ctl"); err == nil {
			b.pgCtl = p
		}
		return b, nil
	}
	dirs, err := filepath.Glob(glob)
	if err != nil {
		return postgresBinaries{}, fmt.Errorf("bad glob %q: %w", glob, err)
	}
	// Directories look like /usr/lib/postgresql/<major>/bin; sort by that number, not as text,
	// so 17 beats 9.6.
	major := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		switch ma, mb := major(a), major(b); {
		case ma > mb:
			return -1
		case ma < mb:
			return 1
		}
		return 0
	})
	for _, dir := range dirs {
		b := postgresBinaries{
			initdb:   filepath.Join(dir, "initdb"),
			postgres: filepath.Join(dir, "postgres"),
		}
		if !isExecutable(b.initdb) || !isExecutable(b.postgres) {
			continue
		}
		if p := filepath.Join(dir, "pg_ctl"); isExecutable(p) {
			b.pgCtl = p
		}
		return b, nil
	}
	return postgresBinaries{}, fmt.Errorf("no initdb and postgres on PATH or in %s", glob)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// postgresCredential returns whom to run the server as. PostgreSQL refuses to run as root, so
// when devstack is root the server runs as the `postgres` system user the package creates.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user to run it as (%w); "+
			"run devstack as a normal user, or set %s", err, envDatabaseURL)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// checkTraversable fails when a directory above dir denies uid/gid the search (x) permission:
// the server would then fail later with a less helpful "permission denied".
func checkTraversable(dir string, uid, gid uint32) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil // not a Unix file system view; let the server try
		}
		perm := fi.Mode().Perm()
		var allowed bool
		switch {
		case st.Uid == uid:
			allowed = perm&0o100 != 0
		case st.Gid == gid:
			allowed = perm&0o010 != 0
		default:
			allowed = perm&0o001 != 0
		}
		if !allowed {
			return fmt.Errorf("user postgres cannot reach %s: %s is %v; allow it (chmod o+x %s) or set %s",
				dir, d, perm, d, envDatabaseURL)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// startPrivatePostgres runs a server of devstack's own on a free port with its data kept in
// dataDir, so data survives between runs and nothing is installed system-wide.
func startPrivatePostgres(ctx context.Context, bins postgresBinaries, dataDir string, sup *supervisor, log *slog.Logger) (*database, error) {
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	// The parent must let the server's user through; the data dir itself must be private to
	// it (the server refuses group or world access).
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		// No cluster, or one whose initdb was interrupted: start over, nothing of value is here.
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := checkTraversable(dataDir, cred.Uid, cred.Gid); err != nil {
			return nil, err
		}
		if err := chownTree(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("give %s to the postgres user: %w", dataDir, err)
		}
	}

	runAs := func(name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		// The server's user may not be allowed into devstack's working directory.
		cmd.Dir = dataDir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		log.Info("initializing private Postgres", "dir", dataDir)
		out, err := runAs(bins.initdb, "-D", dataDir, "-U", "postgres", "--auth=trust",
			"--encoding=UTF8", "--locale=C").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("initdb %s: %w\n%s", dataDir, err, out)
		}
	} else if bins.pgCtl != "" {
		// A server left by a devstack that was killed would hold the data dir; stop it first.
		if runAs(bins.pgCtl, "status", "-D", dataDir).Run() == nil {
			log.Warn("stopping a private Postgres left over from an earlier run", "dir", dataDir)
			if out, err := runAs(bins.pgCtl, "stop", "-D", dataDir, "-m", "fast", "-w").CombinedOutput(); err != nil {
				return nil, fmt.Errorf("stop leftover Postgres in %s: %w\n%s", dataDir, err, out)
			}
		}
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	proc, err := sup.start(procSpec{
		name: "postgres",
		path: bins.postgres,
		args: []string{
			"-D", dataDir,
			"-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1",
			// No Unix socket: the default directory may not be writable by this user or may
			// belong to a system server, and a socket under a deep repo path can exceed the
			// 107-byte limit. Everything here connects over TCP.
			"-c", "unix_socket_directories=",
		},
		dir:        dataDir,
		credential: cred,
		stopSignal: syscall.SIGINT, // "fast" shutdown, the same as pg_ctl stop -m fast
	})
	if err != nil {
		return nil, err
	}

	closeFunc := func(ctx context.Context) error {
		proc.expectExit()
		var stopErr error
		if bins.pgCtl != "" {
			// pg_ctl waits for the checkpoint, so the next run starts without recovery.
			cmd := exec.CommandContext(ctx, bins.pgCtl, "stop", "-D", dataDir, "-m", "fast", "-w")
			cmd.Dir = dataDir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			if out, err := cmd.CombinedOutput(); err != nil {
				stopErr = fmt.Errorf("pg_ctl stop: %w: %s", err, out)
			}
		}
		// Signal as well: harmless when pg_ctl already stopped it, the fallback when it did not.
		return errors.Join(stopErr, proc.stop(ctx))
	}

	admin := postgresURL(addr, "postgres")
	if err := waitPostgres(ctx, admin, proc, 60*time.Second); err != nil {
		return nil, errors.Join(err, closeFunc(context.WithoutCancel(ctx)))
	}
	if err := ensureDatabase(ctx, admin, databaseName); err != nil {
		return nil, errors.Join(fmt.Errorf("private Postgres: %w", err), closeFunc(context.WithoutCancel(ctx)))
	}
	return &database{
		url:    postgresURL(addr, databaseName),
		source: "private server on " + addr + " (data in " + dataDir + ")",
		close:  closeFunc,
	}, nil
}

// waitPostgres polls until the server accepts connections; a fresh cluster takes a moment.
func waitPostgres(ctx context.Context, connURL string, proc *process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = pingPostgres(ctx, connURL, time.Second); last == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("private Postgres exited during start-up: %w", cmp.Or(proc.Err(), errors.New("exit status 0")))
		case <-ctx.Done():
			return fmt.Errorf("private Postgres did not accept connections in time: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// chownTree gives a directory tree to uid:gid.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}
