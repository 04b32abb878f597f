package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Store is an open key and usage database (Open). It is safe for concurrent
// use, and other processes (on this machine for SQLite, anywhere for
// PostgreSQL) may use the same database at the same time.
//
// It is one type for both databases: the SQL is written once, with '?'
// placeholders, over a database (the driver's adapter) and a dialect (what
// the two databases spell differently). Its consumers each declare the few
// methods they use as an interface of their own (httpapi.KeyStore,
// console.KeyStore, Limiter's Leases), so that their tests can fake just
// those.
type Store struct {
	db       database
	d        dialect
	location string
}

// conn is what the shared SQL needs of a database or of a transaction in it.
type conn interface {
	exec(ctx context.Context, q string, args ...any) (rowsAffected int64, err error)
	queryRow(ctx context.Context, q string, args ...any) scanner
	query(ctx context.Context, q string, args ...any) (rows, error)
}

// database is a pool of connections to one database.
type database interface {
	conn
	// inTx runs f in a transaction, committed when f returns nil. Every
	// transaction takes a write lock (SQLite: BEGIN IMMEDIATE) or row locks
	// before it writes (PostgreSQL: SELECT ... FOR UPDATE), so that the
	// read-then-write of admitting a call is atomic.
	inTx(ctx context.Context, f func(conn) error) error
	close() error
}

type scanner interface{ Scan(dest ...any) error }

// rows is a result set, as both drivers' rows are.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// dialect is what differs between the databases.
type dialect struct {
	name string
	// nowUS is an expression for the database's clock in microseconds
	// since the epoch. Leases and buckets are timed by one clock, the
	// database's, however many front ends' clocks disagree.
	nowUS string
	// lockRow follows a SELECT of one row to lock it until the end of the
	// transaction ("" where the transaction holds the database's lock).
	lockRow string
	// lockMigrations, run first in the migration transaction, makes
	// processes that start at once migrate one after the other.
	lockMigrations string
	// migrations[i] brings the schema from version i to i+1.
	migrations []string
	// isUniqueName reports whether err is the active-name index refusing a
	// second active key of one name.
	isUniqueName func(err error) bool
}

func isNoRows(err error) bool {
	return errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows)
}

// migrate brings the schema to the latest version in one transaction, so
// that two processes opening a new database at once cannot both apply a
// migration, and refuses a database a newer binary has migrated.
func (s *Store) migrate(ctx context.Context) error {
	return s.db.inTx(ctx, func(c conn) error {
		if s.d.lockMigrations != "" {
			if _, err := c.exec(ctx, s.d.lockMigrations); err != nil {
				return fmt.Errorf("lock for migration: %w", err)
			}
		}
		if _, err := c.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("create version table: %w", err)
		}
		var version int
		err := c.queryRow(ctx, `SELECT version FROM schema_version`).Scan(&version)
		switch {
		case err == nil:
		case isNoRows(err):
			if _, err := c.exec(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
				return fmt.Errorf("initialise version: %w", err)
			}
		default:
			return fmt.Errorf("read schema version: %w", err)
		}
		if version > len(s.d.migrations) {
			return fmt.Errorf("schema version %d is newer than this binary knows (%d): upgrade scratchrun", version, len(s.d.migrations))
		}
		for v := version; v < len(s.d.migrations); v++ {
			if _, err := c.exec(ctx, s.d.migrations[v]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
		if _, err := c.exec(ctx, `UPDATE schema_version SET version = ?`, len(s.d.migrations)); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
		return nil
	})
}

// schemaVersion is the version the database's schema is at.
func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.queryRow(ctx, `SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

// Location names the database for messages: the file's path, or the
// URL without its password.
func (s *Store) Location() string { return s.location }

// Close closes the database.
func (s *Store) Close() error { return s.db.close() }
