package postgres

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A cluster starts, serves a database of a test's own on its socket only,
// and once stopped leaves neither its server nor its directory.
func TestStartServeStop(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short (the fast tier): starts a PostgreSQL server")
	}
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	ctx := context.Background()
	url := c.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var listen string
	if err := conn.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen); err != nil || listen != "" {
		t.Errorf("listen_addresses = %q, %v; want none (socket only)", listen, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE x (n int); INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	pid := c.Pid()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server %d still there after Stop: %v", pid, err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Stop: %v", c.dir, err)
	}
}
