package harness

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/libs/testkit"
)

// Postgres is a private PostgreSQL server of one test, started from the installed binaries
// (initdb, pg_ctl) in a temporary directory on a free port, so that the test may restart or
// stop it without touching the machine's shared server. It is removed when the test ends.
type Postgres struct {
	// Addr is host:port; URL the admin URL (user postgres, database postgres, trust auth).
	Addr string
	URL  string

	bin  string // the directory of initdb, pg_ctl
	dir  string // the data directory
	cred *syscall.Credential
	mu   sync.Mutex // one pg_ctl at a time
}

// StartPostgres initializes and starts a private server. Durability settings are relaxed
// (fsync off): the server is only ever stopped cleanly (pg_ctl -m fast), which writes
// everything out, and the machine itself does not crash during a test.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	cred, err := postgresUser()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	parent, err := os.MkdirTemp("", "svc-pg-")
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	// The server's user must get through the parent; the data dir must be private to it.
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	p := &Postgres{bin: bin, dir: filepath.Join(parent, "data"), cred: cred}
	if err := os.Mkdir(p.dir, 0o700); err != nil {
		t.Fatalf("harness: %v", err)
	}
	if cred != nil {
		if err := os.Chown(p.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	if out, err := p.command("initdb", "-D", p.dir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("harness: initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p.URL = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: p.Addr, Path: "/postgres", RawQuery: "sslmode=disable"}).String()
	conf := fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 300\n"+
		"fsync = off\nfull_page_writes = off\nsynchronous_commit = off\nshared_buffers = 128MB\n"+
		"logging_collector = off\nlog_min_messages = warning\n", port)
	if err := appendFile(filepath.Join(p.dir, "postgresql.conf"), conf); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		_ = p.command("pg_ctl", "stop", "-D", p.dir, "-m", "immediate", "-w").Run()
	})
	p.Start(t)
	return p
}

// Start starts the server (again) and waits until it accepts connections.
func (p *Postgres) Start(t testing.TB) {
	t.Helper()
	p.ctl(t, "start")
}

// Stop stops the server the fast way: clients are disconnected, everything is written out.
func (p *Postgres) Stop(t testing.TB) {
	t.Helper()
	p.ctl(t, "stop")
}

// Restart is pg_ctl restart -m fast: every connection is cut and the server comes back.
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	p.ctl(t, "restart")
}

func (p *Postgres) ctl(t testing.TB, action string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	args := []string{action, "-D", p.dir, "-w", "-t", "60"}
	if action != "start" {
		args = append(args, "-m", "fast")
	}
	if action != "stop" {
		args = append(args, "-l", filepath.Join(p.dir, "server.log"))
	}
	if out, err := p.command("pg_ctl", args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		t.Fatalf("harness: pg_ctl %s: %v\n%s\n%s", action, err, out, log)
	}
	if action == "stop" {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, p.URL)
		if err == nil {
			_ = c.Close(ctx)
			cancel()
			return
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("harness: private Postgres does not accept connections after %s: %v", action, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NewDatabase creates a database on the server and returns its URL.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	name := testkit.Name("svc")
	p.createDatabase(t, name)
	return p.databaseURL(name)
}

// createDatabase creates database on the server.
func (p *Postgres) createDatabase(t testing.TB, database string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatalf("harness: private Postgres: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize()); err != nil {
		t.Fatalf("harness: create database: %v", err)
	}
}

// PostgresTools checks that the named PostgreSQL programs (initdb, pg_dump, ...) are installed
// where StartPostgres looks for them, and names those that are not.
func PostgresTools(names ...string) error {
	bin, err := postgresBin()
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(bin, n)); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%v not installed in %s (Debian's postgresql package has them)", missing, bin)
	}
	return nil
}

// Dump writes database, as the running server holds it, to file with pg_dump in its custom
// format (-Fc). pg_dump reads every schema in one transaction, so the file is one consistent
// snapshot even while the system writes.
func (p *Postgres) Dump(t testing.TB, database, file string) {
	t.Helper()
	p.client(t, "pg_dump", "--format=custom", "--file="+file, p.databaseURL(database))
}

// Restore creates database on the server and loads file, written by Dump, into it with
// pg_restore in one transaction: all of it or, on the first error, none.
func (p *Postgres) Restore(t testing.TB, database, file string) {
	t.Helper()
	p.createDatabase(t, database)
	p.client(t, "pg_restore", "--single-transaction", "--exit-on-error", "--no-owner", "--dbname="+p.databaseURL(database), file)
}

// databaseURL is the URL of database on the server.
func (p *Postgres) databaseURL(database string) string {
	u, _ := url.Parse(p.URL)
	u.Path = "/" + database
	return u.String()
}

// client runs a client program of the installation (pg_dump, pg_restore) as the test's own
// user, which may write where the server's user may not.
func (p *Postgres) client(t testing.TB, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGCONNECT_TIMEOUT=10")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("harness: %s: %v\n%s", name, err, out)
	}
}

func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = filepath.Dir(p.dir) // the server's user may not enter the test's directory
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd
}

// postgresBin finds the newest installed server version (Debian's layout), or pg_ctl on PATH.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
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
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (pg_ctl, initdb) in /usr/lib/postgresql/*/bin or on PATH")
}

// postgresUser is whom the server runs as: PostgreSQL refuses root, so a root test runs it as
// the postgres system user.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres user to run a private server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func freePort(t testing.TB) int {
	t.Helper()
	return reservePort(t)
}
