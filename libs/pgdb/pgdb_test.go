package pgdb_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/testkit"
)

// migrations that fail if applied twice: a plain CREATE TABLE, and an insert we can count.
func migrations() fstest.MapFS {
	return fstest.MapFS{
		"0001_first.sql":  {Data: []byte("-- +goose Up\nCREATE TABLE applied (n int NOT NULL);\nINSERT INTO applied VALUES (1);\n-- +goose Down\nDROP TABLE applied;\n")},
		"0002_second.sql": {Data: []byte("-- +goose Up\nCREATE TABLE second (id text PRIMARY KEY);\nINSERT INTO applied VALUES (2);\n-- +goose Down\nDROP TABLE second;\n")},
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("ReplicasStartingTogetherMigrateOnce", func(t *testing.T) {
		t.Parallel()
		dbURL := testkit.NewDatabase(t)
		ctx := context.Background()
		const replicas = 4

		var wg sync.WaitGroup
		errc := make(chan error, replicas)
		for range replicas {
			// Each replica has its own pool, as separate processes would.
			pool, err := pgdb.Open(ctx, pgdb.Config{URL: dbURL, Schema: "editor", Service: "test"})
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			wg.Go(func() { errc <- pgdb.Migrate(ctx, pool, "editor", migrations(), slog.New(slog.DiscardHandler)) })
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			require.NoError(t, err)
		}

		pool, err := pgdb.Open(ctx, pgdb.Config{URL: dbURL, Schema: "editor"})
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		var applied []int
		rows, err := pool.Query(ctx, "SELECT n FROM applied ORDER BY n")
		require.NoError(t, err)
		applied, err = pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, applied, "each migration ran exactly once")

		var versions int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM editor.goose_db_version WHERE version_id > 0").Scan(&versions))
		require.Equal(t, 2, versions)

		var schema string
		require.NoError(t, pool.QueryRow(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 'second'").Scan(&schema))
		require.Equal(t, "editor", schema, "tables land in the service's own schema")
	})

	t.Run("SecondStartIsANoOp", func(t *testing.T) {
		t.Parallel()
		pool := testkit.NewSchema(t, migrations())
		var schema string
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema))
		require.NoError(t, pgdb.Migrate(context.Background(), pool, schema, migrations(), slog.New(slog.DiscardHandler)))
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM applied").Scan(&n))
		require.Equal(t, 2, n)
	})
}

func TestInTx(t *testing.T) {
	t.Parallel()
	pool := testkit.NewSchema(t, migrations())
	ctx := context.Background()

	err := pgdb.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO applied VALUES (99)")
		require.NoError(t, err)
		return context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, pgdb.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO applied VALUES (7)")
		return err
	}))
	var got []int
	rows, err := pool.Query(ctx, "SELECT n FROM applied WHERE n > 2 ORDER BY n")
	require.NoError(t, err)
	got, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{7}, got, "the failed transaction left nothing")
}
