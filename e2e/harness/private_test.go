package harness

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPrivateServers starts a private Postgres and Redis, restarts and stops them, and checks
// that each answers again on the same address.
func TestPrivateServers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	pg := StartPostgres(t)
	db := pg.NewDatabase(t)
	query := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, db)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "SELECT 1")
		return err
	}
	if err := query(); err != nil {
		t.Fatal(err)
	}
	pg.Restart(t)
	if err := query(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	pg.Stop(t)
	if err := query(); err == nil {
		t.Fatal("a stopped server answered")
	}
	pg.Start(t)
	if err := query(); err != nil {
		t.Fatalf("after start: %v", err)
	}

	r := StartRedis(t)
	if _, err := r.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := r.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Do("EXISTS", "k"); got != "0" {
		t.Fatalf("EXISTS after FLUSHALL: %q", got)
	}
	r.Stop(t)
	if _, err := r.Do("PING"); err == nil {
		t.Fatal("a stopped server answered")
	}
	r.Start(t)
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after start: %q %v", got, err)
	}
}
