package store

import (
	"fmt"
	"math"
	"time"
)

// Lease timing. A front end renews the leases of its calls in flight every
// RenewEvery; a lease not renewed for LeaseTTL expires, so the slots of a
// front end that died (or lost the database) come back within LeaseTTL of
// its last renewal. Four renewals may be missed, under load, before a live
// call's slot could be taken.
const (
	LeaseTTL   = 5 * time.Second
	RenewEvery = time.Second
)

// Lease is one admitted call's hold on a concurrency slot of its key.
type Lease struct {
	ID int64
	// Key is the key as it was when the call was admitted.
	Key Key
}

// Limit names a key's limit.
type Limit string

// The limits of a key.
const (
	LimitRate        Limit = "rate"
	LimitConcurrency Limit = "concurrency"
)

// LimitError is Admit's refusal of a call of a key at one of its limits.
type LimitError struct {
	Limit Limit
	// Max is the key's limit: runs per minute, or calls at once.
	Max int
	// RetryAfter estimates when the key is under the limit again: when the
	// bucket holds a token, or when the key's earliest call in flight is
	// expected to end.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	if e.Limit == LimitRate {
		return fmt.Sprintf("the key's %d runs per minute are used up (next in %s)", e.Max, e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("the key has its %d calls in flight (one expected to end in %s)", e.Max, e.RetryAfter.Round(time.Millisecond))
}

// bucket is a key's rate as a token bucket: a key with rate N/min may start
// N runs at once and then one every 60/N seconds.
type bucket struct {
	tokens float64
	atUS   int64 // when tokens was counted, on the database's clock
}

// refilled is the bucket at nowUS, holding at most perMinute tokens.
func (b bucket) refilled(nowUS int64, perMinute int) bucket {
	elapsed := max(float64(nowUS-b.atUS), 0) / 1e6
	return bucket{tokens: math.Min(float64(perMinute), b.tokens+elapsed*float64(perMinute)/60), atUS: nowUS}
}

// untilToken is how long until the bucket holds a whole token.
func (b bucket) untilToken(perMinute int) time.Duration {
	return time.Duration((1 - b.tokens) / (float64(perMinute) / 60) * float64(time.Second))
}
