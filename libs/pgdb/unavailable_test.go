package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/pgdb"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"no rows", fmt.Errorf("get run: %w", pgx.ErrNoRows), false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"canceled", context.Canceled, false},
		{"shutting down", fmt.Errorf("tick: %w", &pgconn.PgError{Code: "57P03"}), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"refused", fmt.Errorf("get: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"cut", fmt.Errorf("get: %w", io.ErrUnexpectedEOF), true},
		{"reset", syscall.ECONNRESET, true},
		{"other", errors.New("boom"), false},
	} {
		require.Equal(t, tc.want, pgdb.Unavailable(tc.err), tc.name)
	}
}

// A real refused connection, as the pool reports it while Postgres is down.
func TestUnavailableRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = pgx.Connect(context.Background(), "postgres://postgres@"+addr+"/postgres?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.True(t, pgdb.Unavailable(fmt.Errorf("get run: %w", err)), "%v", err)
}
