package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrNotFound is returned (wrapped) when a key does not exist or is revoked.
var ErrNotFound = errors.New("no such key")

// Open opens the database named by dsn, bringing its schema up to date: a
// PostgreSQL database for a postgres:// (or postgresql://) URL, else the
// SQLite file at that path (created, with its directory, when missing).
func Open(ctx context.Context, dsn string) (*Store, error) {
	switch {
	case dsn == "":
		return nil, errors.New("open key store: no database given (a file path or a postgres:// URL)")
	case IsPostgresURL(dsn):
		return openPostgres(ctx, dsn)
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("open key store %s: a URL must start with postgres:// (other databases are not supported); a file is named by its path", Redact(dsn))
	default:
		return openSQLite(ctx, dsn)
	}
}

// IsPostgresURL reports whether dsn names a PostgreSQL database rather than
// a SQLite file.
func IsPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Redact returns dsn fit to print: a URL's password is replaced by "xxxxx"
// (and its password= parameter dropped); a path is returned as it is.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		// Unparseable: say only what kind of thing it was.
		scheme, _, _ := strings.Cut(dsn, "://")
		return scheme + "://(unparseable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
