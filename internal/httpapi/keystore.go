package httpapi

import (
	"context"
	"time"

	"github.com/scratchrun/scratchrun/internal/store"
)

// KeyStore is what the server needs of its key store (*store.Store is
// one): authenticating a request's key, applying the key's limits (a
// store.Limiter's leases) and accounting for its calls. Servers that share
// one database hold each key to its limits together.
type KeyStore interface {
	// HasKeys and Authenticate are store.Store's: see there.
	HasKeys(ctx context.Context) (bool, error)
	Authenticate(ctx context.Context, secret string) (store.Key, error)
	// KeyByID is store.Store's: the key an OAuth token acts as.
	KeyByID(ctx context.Context, id string) (store.Key, error)
	// RecordUsage and RecordRefusal are store.Store's: see there.
	RecordUsage(ctx context.Context, u store.Usage) error
	RecordRefusal(ctx context.Context, keyID, reason string, at time.Time) error
	store.Leases
	// The entries of idempotent retries (idempotency.go).
	idempotencyStore
}

var _ KeyStore = (*store.Store)(nil)

// keyLookup is what the authenticator reads.
type keyLookup interface {
	HasKeys(ctx context.Context) (bool, error)
	Authenticate(ctx context.Context, secret string) (store.Key, error)
	// KeyByID is store.Store's: the key an OAuth token acts as.
	KeyByID(ctx context.Context, id string) (store.Key, error)
}

// accounts is what the gate writes: a row per run, a count per refusal.
type accounts interface {
	RecordUsage(ctx context.Context, u store.Usage) error
	RecordRefusal(ctx context.Context, keyID, reason string, at time.Time) error
}
