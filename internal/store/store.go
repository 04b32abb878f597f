package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Store is an open key and usage database. It is safe for concurrent use,
// and other processes (on this machine for SQLite, anywhere for PostgreSQL)
// may use the same database at the same time.
type Store interface {
	// CreateKey makes a new key and returns it with its secret, which is
	// never stored and cannot be shown again.
	CreateKey(ctx context.Context, nk NewKey) (Key, string, error)
	// Authenticate returns the active key whose secret this is. Any failure
	// to match (malformed, unknown, revoked) is ErrNotFound, so callers
	// cannot tell them apart and neither can their clients.
	Authenticate(ctx context.Context, secret string) (Key, error)
	// KeyByID returns the key with this id, revoked or not.
	KeyByID(ctx context.Context, id string) (Key, error)
	// ActiveKey returns the active key with this id or, failing that, this
	// name.
	ActiveKey(ctx context.Context, idOrName string) (Key, error)
	// ListKeys returns every key, oldest first.
	ListKeys(ctx context.Context) ([]Key, error)
	// Revoke revokes the active key with this id or name, at once: the next
	// request that presents it is refused, by every front end.
	Revoke(ctx context.Context, idOrName string) (Key, error)
	// SetLimits changes the limits of the active key with this id or name;
	// a zero field keeps its value. Calls admitted already keep running.
	SetLimits(ctx context.Context, idOrName string, change LimitChange) (Key, error)
	// HasKeys reports whether any key was ever created (revoked ones count:
	// a server whose keys were all revoked must stay closed, not fall open).
	HasKeys(ctx context.Context) (bool, error)

	// RecordUsage appends one usage row.
	RecordUsage(ctx context.Context, u Usage) error
	// ListUsage returns the selected rows, oldest first.
	ListUsage(ctx context.Context, f UsageFilter) ([]Usage, error)
	// SummarizeUsage totals the selected rows per key, ordered by key id.
	SummarizeUsage(ctx context.Context, f UsageFilter) ([]UsageSummary, error)
	// UsageSeries counts the selected runs per key in intervals of step
	// (aligned to multiples of step since the epoch), ordered by interval
	// and key; intervals without runs are left out.
	UsageSeries(ctx context.Context, f UsageFilter, step time.Duration) ([]UsagePoint, error)
	// DurationPercentiles returns the duration of the selected runs at
	// each share in ps (0.5 for the median; each in (0, 1]), by nearest
	// rank; zeros when nothing is selected. f.Limit is ignored.
	DurationPercentiles(ctx context.Context, f UsageFilter, ps ...float64) ([]time.Duration, error)
	// LastUsed returns when each key that ever ran anything started its
	// latest run.
	LastUsed(ctx context.Context) (map[string]time.Time, error)
	// RecordRefusal counts one call of keyID refused before it ran (a
	// key's limit, a full server, draining, an unknown runtime), by its
	// reason, in the minute of at.
	RecordRefusal(ctx context.Context, keyID, reason string, at time.Time) error
	// SummarizeRefusals totals the refusals per key and reason, ordered by
	// both, in the window of f (KeyIDs, Since and Until, to the minute;
	// the other fields are ignored).
	SummarizeRefusals(ctx context.Context, f UsageFilter) ([]RefusalCount, error)

	// Admit lets one call of an active key start, in one transaction, if the
	// key is within its limits across every process sharing the database:
	// it spends a token of the key's rate and takes a lease on one of its
	// concurrency slots, which expires LeaseTTL from now unless renewed.
	// expect is how long the call is expected to hold the slot (it feeds
	// the Retry-After of the key's next refusal). A key that does not exist
	// or is revoked is ErrNotFound; one at a limit, a *LimitError. Use a
	// Limiter rather than calling this directly: it renews the lease.
	Admit(ctx context.Context, keyID string, expect time.Duration) (Lease, error)
	// Spend spends one token of an active key's rate, in one transaction,
	// and takes no concurrency slot: for what counts against the key's
	// rate without being a call in flight (opening an MCP session). A key
	// that does not exist or is revoked is ErrNotFound; one whose rate is
	// used up, a *LimitError. Use Limiter.Spend for its Retry-After.
	Spend(ctx context.Context, keyID string) error
	// Renew extends the given leases to LeaseTTL from now and returns those
	// it found (a lease missing here expired and its slot may be in use).
	Renew(ctx context.Context, leaseIDs []int64) ([]int64, error)
	// Release ends a lease; refund gives its rate token back too, for a
	// call that was admitted and then did not run.
	Release(ctx context.Context, lease Lease, refund bool) error

	// Location names the database for messages: the file's path, or the
	// URL without its password.
	Location() string
	// Close closes the database.
	Close() error
}

// ErrNotFound is returned (wrapped) when a key does not exist or is revoked.
var ErrNotFound = errors.New("no such key")

// Open opens the database named by dsn, bringing its schema up to date: a
// PostgreSQL database for a postgres:// (or postgresql://) URL, else the
// SQLite file at that path (created, with its directory, when missing).
func Open(ctx context.Context, dsn string) (Store, error) {
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
