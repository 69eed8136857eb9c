package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connTx is a transaction that inJobTx began itself on conn (its BEGIN pipelined with the
// run's lock), as the pgx.Tx that River's InsertTx and JobCompleteTx and our own statements
// take. inJobTx commits or rolls it back; nothing inside it nests transactions.
type connTx struct{ conn *pgx.Conn }

var _ pgx.Tx = connTx{}

var errNested = errors.New("engine: nested transactions are not supported in a step's transaction")

func (t connTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNested }

func (t connTx) Commit(ctx context.Context) error {
	_, err := t.conn.Exec(ctx, "COMMIT")
	return err
}

func (t connTx) Rollback(ctx context.Context) error {
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

func (t connTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

func (t connTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t connTx) Conn() *pgx.Conn { return t.conn }

// rollback ends a failed transaction; should that fail too, the connection is closed (the pool
// then drops it on release).
func rollback(ctx context.Context, conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Close(ctx)
	}
}
