package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgresDialect: the clock is the database server's (front ends on other
// machines disagree about theirs), read at each statement; admitting a call
// locks its key's row.
var postgresDialect = dialect{
	name:    "postgres",
	nowUS:   `CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)`,
	lockRow: ` FOR UPDATE`,
	// Any constant will do, as long as nothing else in the database uses
	// it: 0x5352 is "SR".
	lockMigrations: `SELECT pg_advisory_xact_lock(21330)`,
	migrations:     postgresMigrations,
	isUniqueName: func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "keys_active_name"
	},
}

// connectTimeout bounds each connection attempt when the URL sets none: a
// database that does not answer must fail `serve` at start, not hang it.
const connectTimeout = 10 * time.Second

// openPostgres connects to the PostgreSQL database at url (a pool of
// connections) and brings its schema up to date.
func openPostgres(ctx context.Context, url string) (*Store, error) {
	where := Redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password and all.
		return nil, fmt.Errorf("open key store %s: not a valid PostgreSQL URL", where)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open key store %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open key store %s: %w", where, err)
	}
	s := &Store{db: pgDB{pgConn{pool}, pool}, d: postgresDialect, location: where}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open key store %s: %w", where, err)
	}
	return s, nil
}

// pgQuerier is what a pool and a transaction both offer.
type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgConn adapts a pool or a transaction to conn, numbering the shared
// SQL's placeholders.
type pgConn struct{ q pgQuerier }

func (c pgConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, numbered(q), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (c pgConn) queryRow(ctx context.Context, q string, args ...any) scanner {
	return c.q.QueryRow(ctx, numbered(q), args...)
}

func (c pgConn) query(ctx context.Context, q string, args ...any) (rows, error) {
	rs, err := c.q.Query(ctx, numbered(q), args...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// pgDB adapts a pgx pool to database.
type pgDB struct {
	pgConn
	pool *pgxpool.Pool
}

func (d pgDB) inTx(ctx context.Context, f func(conn) error) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Rollback after Commit is a no-op; it must not be cut short by ctx.
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := f(pgConn{tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (d pgDB) close() error {
	d.pool.Close()
	return nil
}

// numbered turns the shared SQL's '?' placeholders into PostgreSQL's $1,
// $2, ... by hand: neither driver rewrites the other's style, and the
// shared SQL has no '?' anywhere else (no string literal holds one).
func numbered(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
