package store

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Expectations of how long a call holds its key's slot, for Retry-After.
const (
	defaultHold   = time.Second // before any call has ended
	holdSmoothing = 0.2         // weight of the newest call in the running average
	minRetryAfter = time.Second // Retry-After is whole seconds, at least one
	releaseWait   = 10 * time.Second
)

// Leases is what a Limiter needs of the store: the four steps of a key's
// limits, each one transaction (see Store.Admit, Store.Spend, Store.Renew
// and Store.Release). *Store is one.
type Leases interface {
	Admit(ctx context.Context, keyID string, expect time.Duration) (Lease, error)
	Spend(ctx context.Context, keyID string) error
	Renew(ctx context.Context, leaseIDs []int64) ([]int64, error)
	Release(ctx context.Context, lease Lease, refund bool) error
}

var _ Leases = (*Store)(nil)

// Limiter applies keys' limits for one front end: it admits calls through
// the store (Store.Admit), renews the leases of its calls in flight every
// RenewEvery while it has any, and releases them when the calls end. A
// process that dies stops renewing, and its leases expire within LeaseTTL.
type Limiter struct {
	st  Leases
	log *slog.Logger

	mu       sync.Mutex
	held     map[int64]struct{}
	renewing bool
	avgHold  time.Duration
}

// NewLimiter returns a Limiter over st; log (nil: discard) hears of leases
// that could not be renewed or released.
func NewLimiter(st Leases, log *slog.Logger) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{st: st, log: log, held: map[int64]struct{}{}, avgHold: defaultHold}
}

// Permit is an admitted call's hold on its key's limits.
type Permit struct {
	l     *Limiter
	lease Lease
	taken time.Time
	once  sync.Once
}

// Key is the key as it was when the call was admitted.
func (p *Permit) Key() Key { return p.lease.Key }

// Admit admits one call of the key keyID (no key, "": no limits and a nil
// Permit). bound is the longest the call can hold its slot (its wait for a
// sandbox, its timeout and teardown). A key that does not exist or is
// revoked is ErrNotFound; one at a limit, a *LimitError whose RetryAfter is
// at least a second.
func (l *Limiter) Admit(ctx context.Context, keyID string, bound time.Duration) (*Permit, error) {
	if keyID == "" {
		return nil, nil
	}
	l.mu.Lock()
	expect := min(l.avgHold, bound)
	l.mu.Unlock()
	lease, err := l.st.Admit(ctx, keyID, expect)
	if le, ok := err.(*LimitError); ok {
		le.RetryAfter = max(le.RetryAfter, minRetryAfter)
		return nil, le
	}
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.held[lease.ID] = struct{}{}
	if !l.renewing {
		l.renewing = true
		go l.renew()
	}
	l.mu.Unlock()
	return &Permit{l: l, lease: lease, taken: time.Now()}, nil
}

// Spend spends one token of the rate of the key keyID (no key, "": no
// limits) without taking a slot: see Store.Spend. A key at its rate is a
// *LimitError whose RetryAfter is at least a second.
func (l *Limiter) Spend(ctx context.Context, keyID string) error {
	if keyID == "" {
		return nil
	}
	err := l.st.Spend(ctx, keyID)
	if le, ok := err.(*LimitError); ok {
		le.RetryAfter = max(le.RetryAfter, minRetryAfter)
	}
	return err
}

// Release gives the call's slot back (once; nil is a no-op). ran false,
// for a call that was admitted and then not run (refused for capacity,
// found invalid by the engine), also gives its rate token back, so that
// only runs count. A release the store does not take is logged: the lease,
// no longer renewed, expires within LeaseTTL.
func (p *Permit) Release(ran bool) {
	if p == nil {
		return
	}
	p.once.Do(func() {
		l := p.l
		l.mu.Lock()
		delete(l.held, p.lease.ID)
		if ran {
			held := time.Since(p.taken)
			l.avgHold = time.Duration(holdSmoothing*float64(held) + (1-holdSmoothing)*float64(l.avgHold))
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
		defer cancel()
		if err := l.st.Release(ctx, p.lease, !ran); err != nil {
			l.log.Warn("key slot not released; it frees itself when its lease expires", "key", p.lease.Key.ID, "lease_ttl", LeaseTTL, "err", err)
		}
	})
}

// renew renews the held leases every RenewEvery until none is held.
func (l *Limiter) renew() {
	tick := time.NewTicker(RenewEvery)
	defer tick.Stop()
	for range tick.C {
		l.mu.Lock()
		if len(l.held) == 0 {
			l.renewing = false
			l.mu.Unlock()
			return
		}
		ids := make([]int64, 0, len(l.held))
		for id := range l.held {
			ids = append(ids, id)
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), LeaseTTL-RenewEvery)
		renewed, err := l.st.Renew(ctx, ids)
		cancel()
		if err != nil {
			l.log.Warn("key slots not renewed; retrying", "leases", len(ids), "lease_ttl", LeaseTTL, "err", err)
			continue
		}
		l.reportLost(ids, renewed)
	}
}

// reportLost logs the leases that were neither renewed nor released since:
// they expired (the database was out of reach for LeaseTTL), so their key
// may run over its concurrency until those calls end.
func (l *Limiter) reportLost(asked, renewed []int64) {
	if len(renewed) == len(asked) {
		return
	}
	got := make(map[int64]bool, len(renewed))
	for _, id := range renewed {
		got[id] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range asked {
		if _, still := l.held[id]; still && !got[id] {
			l.log.Warn("a key slot's lease expired while its call ran; the key may briefly exceed its concurrency", "lease", id)
			delete(l.held, id) // renewing it again would find nothing
		}
	}
}
