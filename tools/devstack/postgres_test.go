package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

// testPostgresURL is a server the tests may create databases on: SVC_TEST_DATABASE_URL (what CI
// sets) or the standard local one. Tests that need it skip without it.
func testPostgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SVC_TEST_DATABASE_URL")
	if u == "" {
		u = postgresURL("127.0.0.1:5432", "postgres")
	}
	if err := pingPostgres(t.Context(), u, 2*time.Second); err != nil {
		t.Skipf("no Postgres to test against (%v); set SVC_TEST_DATABASE_URL", err)
	}
	return u
}

func noLookPath(string) (string, error) { return "", exec.ErrNotFound }

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	port, err := freePort()
	require.NoError(t, err)
	return "127.0.0.1:" + strconv.Itoa(port)
}

func TestFindPostgresBinaries(t *testing.T) {
	t.Parallel()

	// fakeInstall makes <root>/<version>/bin with the given programs.
	fakeInstall := func(t *testing.T, root, version string, programs ...string) string {
		t.Helper()
		dir := filepath.Join(root, version, "bin")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, p := range programs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755))
		}
		return dir
	}

	t.Run("NewestCompleteVersion", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		fakeInstall(t, root, "9.6", "initdb", "postgres", "pg_ctl")
		want := fakeInstall(t, root, "15", "initdb", "postgres")
		fakeInstall(t, root, "17", "postgres") // no initdb: a client-only leftover

		b, err := findPostgresBinaries(noLookPath, filepath.Join(root, "*", "bin"))
		require.NoError(t, err)
		require.Equal(t, postgresBinaries{
			initdb:   filepath.Join(want, "initdb"),
			postgres: filepath.Join(want, "postgres"),
		}, b)
	})

	t.Run("PathFirst", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		fakeInstall(t, root, "16", "initdb", "postgres", "pg_ctl")
		lookPath := func(name string) (string, error) { return "/opt/pg/bin/" + name, nil }

		b, err := findPostgresBinaries(lookPath, filepath.Join(root, "*", "bin"))
		require.NoError(t, err)
		require.Equal(t, postgresBinaries{
			initdb: "/opt/pg/bin/initdb", postgres: "/opt/pg/bin/postgres", pgCtl: "/opt/pg/bin/pg_ctl",
		}, b)
	})

	t.Run("NothingInstalled", func(t *testing.T) {
		t.Parallel()
		_, err := findPostgresBinaries(noLookPath, filepath.Join(t.TempDir(), "*", "bin"))
		require.ErrorContains(t, err, "no initdb and postgres")
	})
}

func TestCheckTraversable(t *testing.T) {
	t.Parallel()

	// An owner the test does not run as, so only the "other" bits decide.
	const stranger = 54321
	base := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	require.NoError(t, os.Chmod(base, 0o755))
	closed := filepath.Join(base, "closed")
	require.NoError(t, os.MkdirAll(filepath.Join(closed, "data"), 0o700))
	open := filepath.Join(base, "open")
	require.NoError(t, os.MkdirAll(filepath.Join(open, "data"), 0o755))

	require.NoError(t, checkTraversable(filepath.Join(open, "data"), stranger, stranger))
	err := checkTraversable(filepath.Join(closed, "data"), stranger, stranger)
	require.ErrorContains(t, err, "chmod o+x "+closed)
}

func TestEnsureDatabase(t *testing.T) {
	t.Parallel()

	admin := testPostgresURL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "devstack_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize())
			_ = conn.Close(context.Background())
		}
	})

	require.NoError(t, ensureDatabase(t.Context(), admin, name))
	require.NoError(t, ensureDatabase(t.Context(), admin, name), "a second run finds it")

	conn, err := pgx.Connect(t.Context(), admin)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var exists bool
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.True(t, exists)
}

func TestResolvePostgres(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		cfg config
		sup *supervisor
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{
			cfg: config{
				stateDir:     t.TempDir(),
				postgresAddr: closedAddr(t),
				postgresGlob: filepath.Join(t.TempDir(), "*", "bin"),
				lookPath:     noLookPath,
			},
			sup: newSupervisor(testLog(t), &testkit.SyncBuffer{}, 8),
		}
	}

	t.Run("UserURLThatDoesNotAnswer", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		env := map[string]string{envDatabaseURL: "postgres://me:hunter2@" + closedAddr(t) + "/svc"}
		_, err := resolvePostgres(t.Context(), bundle.cfg, env, bundle.sup, testLog(t))
		require.ErrorContains(t, err, envDatabaseURL+" does not answer")
		require.NotContains(t, err.Error(), "hunter2", "passwords stay out of messages")
	})

	t.Run("UserURL", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		u := testPostgresURL(t)
		db, err := resolvePostgres(t.Context(), bundle.cfg, map[string]string{envDatabaseURL: u}, bundle.sup, testLog(t))
		require.NoError(t, err)
		require.Equal(t, u, db.url)
		require.NoError(t, db.close(t.Context()))
	})

	t.Run("NothingFoundSaysHowToGetOne", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		_, err := resolvePostgres(t.Context(), bundle.cfg, map[string]string{}, bundle.sup, testLog(t))
		require.ErrorContains(t, err, "apt-get install postgresql")
		require.ErrorContains(t, err, envDatabaseURL)
	})

	t.Run("PrivateServer", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("starts a real PostgreSQL server")
		}
		bins, err := findPostgresBinaries(exec.LookPath, "/usr/lib/postgresql/*/bin")
		if err != nil {
			t.Skipf("PostgreSQL is not installed: %v", err)
		}
		bundle := setup(t)
		// As root the server runs as user postgres, which must be able to reach the directory,
		// as it can reach a repository checkout.
		require.NoError(t, os.Chmod(filepath.Dir(bundle.cfg.stateDir), 0o755))
		require.NoError(t, os.Chmod(bundle.cfg.stateDir, 0o755))
		dataDir := filepath.Join(bundle.cfg.stateDir, "postgres")

		for range 2 { // the second start reuses the data directory of the first
			db, err := startPrivatePostgres(t.Context(), bins, dataDir, bundle.sup, testLog(t))
			require.NoError(t, err)
			require.NoError(t, pingPostgres(t.Context(), db.url, 5*time.Second), "database svc exists")
			require.NoError(t, db.close(t.Context()))
			require.Error(t, pingPostgres(t.Context(), db.url, time.Second), "stopped")
		}
		require.NoError(t, bundle.sup.Err(), "stopping is not crashing")
	})
}

func TestRedactURL(t *testing.T) {
	t.Parallel()

	require.Equal(t, "postgres://me:xxxxx@db:5432/svc", redactURL("postgres://me:secret@db:5432/svc"))
	require.NotContains(t, redactURL("postgres://me:sec ret@db/%zz"), "sec")
}
