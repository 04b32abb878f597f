package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteDialect: the clock is the machine's (every process sharing a file
// is on it), read by SQLite itself; a transaction takes the database's write
// lock when it begins (_txlock=immediate), so rows need no locks of their
// own.
var sqliteDialect = dialect{
	name:       "sqlite",
	nowUS:      `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`,
	migrations: sqliteMigrations,
	isUniqueName: func(err error) bool {
		return strings.Contains(err.Error(), "UNIQUE") && strings.Contains(err.Error(), "name")
	},
}

// openSQLite opens (creating it and its directory when missing) the SQLite
// file at path and brings its schema up to date.
func openSQLite(ctx context.Context, path string) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open key store %s: the path may not contain '?' or '#'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open key store: create directory: %w", err)
	}
	// Pragmas go in the DSN so that every pooled connection gets them. The
	// busy timeout makes writers of several processes (servers sharing the
	// file, `scratchrun keys`) wait their turn rather than fail.
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open key store %s: %w", path, err)
	}
	if err := useWAL(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open key store %s: %w", path, err)
	}
	s := &Store{db: sqliteDB{sqliteConn{db}, db}, d: sqliteDialect, location: path}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open key store %s: %w", path, err)
	}
	// The file holds key hashes and usage: readable by its owner only.
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("open key store %s: %w", path, err)
	}
	return s, nil
}

// walWait bounds how long useWAL retries, as the busy timeout bounds a
// writer's wait.
const walWait = 10 * time.Second

// useWAL puts the database in write-ahead-log mode, which lets readers go on
// beside a writer. The mode is the file's, kept across connections, so it is
// set once here rather than by every pooled connection: switching a new
// file's mode takes its exclusive lock, and SQLite answers SQLITE_BUSY at
// once, without waiting the busy timeout, to a connection that would
// deadlock waiting for it. Several processes opening a new file together
// (TestMigrations/concurrent) met that as "begin: database is locked" about
// one time in thirty; here the switch is retried for up to walWait.
func useWAL(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(walWait)
	for {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("journal mode is %q, not wal", mode)
			}
			return nil
		}
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return fmt.Errorf("set the journal mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		}
	}
}

// sqlQuerier is what a database/sql handle and a transaction both offer.
type sqlQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sqliteConn adapts a database/sql handle or transaction to conn.
type sqliteConn struct{ q sqlQuerier }

func (c sqliteConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqliteConn) queryRow(ctx context.Context, q string, args ...any) scanner {
	return c.q.QueryRowContext(ctx, q, args...)
}

func (c sqliteConn) query(ctx context.Context, q string, args ...any) (rows, error) {
	rs, err := c.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

// sqliteDB adapts database/sql to database.
type sqliteDB struct {
	sqliteConn
	db *sql.DB
}

func (d sqliteDB) inTx(ctx context.Context, f func(conn) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := f(sqliteConn{tx}); err != nil {
		return err
	}
	return tx.Commit()
}

func (d sqliteDB) close() error { return d.db.Close() }

// sqlRows gives database/sql's rows the Close of rows (errors surface in
// Err).
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }
