package console

import (
	"context"
	"time"

	"github.com/scratchrun/scratchrun/internal/store"
)

// KeyStore is what the console needs of the server's key store
// (*store.Store is one): managing keys on the keys page, and reading usage
// and refusals back for the usage page and the runs' export. Each method
// is store.Store's: see there.
type KeyStore interface {
	CreateKey(ctx context.Context, nk store.NewKey) (store.Key, string, error)
	KeyByID(ctx context.Context, id string) (store.Key, error)
	ListKeys(ctx context.Context) ([]store.Key, error)
	Revoke(ctx context.Context, idOrName string) (store.Key, error)
	SetLimits(ctx context.Context, idOrName string, change store.LimitChange) (store.Key, error)
	LastUsed(ctx context.Context) (map[string]time.Time, error)

	ListUsage(ctx context.Context, f store.UsageFilter) ([]store.Usage, error)
	SummarizeUsage(ctx context.Context, f store.UsageFilter) ([]store.UsageSummary, error)
	UsageSeries(ctx context.Context, f store.UsageFilter, step time.Duration) ([]store.UsagePoint, error)
	DurationPercentiles(ctx context.Context, f store.UsageFilter, ps ...float64) ([]time.Duration, error)
	SummarizeRefusals(ctx context.Context, f store.UsageFilter) ([]store.RefusalCount, error)
}

var _ KeyStore = (*store.Store)(nil)
