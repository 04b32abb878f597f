package httpapi

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// ErrDraining is returned (wrapped) for work offered while the server drains.
var ErrDraining = errors.New("the server is shutting down and takes no new work")

// errUnauthorized is returned when a run's caller is not an active key.
var errUnauthorized = errors.New("a valid API key is required (Authorization: Bearer sr_live_...)")

// RejectedError is a request refused before running: over capacity, over a
// key's limits, or while draining. It wraps execapi.ErrAtCapacity (or
// ErrDraining), so every front end maps it as it maps the engine's own; its
// message says which limit was hit and when to retry.
type RejectedError struct {
	// Reason is one of "at_capacity", "queue_full", "key_rate",
	// "key_concurrency" and "draining".
	Reason string
	// RetryAfter is the estimate of when a retry can succeed (zero when
	// draining).
	RetryAfter time.Duration
	// Limit is the key's limit that was hit (runs per minute, or requests
	// in flight), zero for the server's own limits.
	Limit int
}

func newRejected(r rejection, limit int) *RejectedError {
	return &RejectedError{Reason: r.reason, RetryAfter: r.retryAfter, Limit: limit}
}

// Error says which limit was hit and when to retry.
func (e *RejectedError) Error() string {
	secs := retryAfterSeconds(e.RetryAfter)
	switch e.Reason {
	case reasonKeyRate:
		return fmt.Sprintf("this API key's limit of %d runs per minute is used up; retry after %d s", e.Limit, secs)
	case reasonKeyConcurrency:
		return fmt.Sprintf("this API key already has %d requests in flight, its limit; retry after %d s", e.Limit, secs)
	case reasonQueueFull:
		return fmt.Sprintf("at capacity: every sandbox slot is busy and the queue is full; retry after %d s", secs)
	case reasonDraining:
		return ErrDraining.Error() + "; retry against another server or once it is back"
	default:
		return fmt.Sprintf("at capacity: every sandbox slot is busy and none freed within the queue wait; retry after %d s", secs)
	}
}

// Unwrap returns ErrDraining or execapi.ErrAtCapacity.
func (e *RejectedError) Unwrap() error {
	if e.Reason == reasonDraining {
		return ErrDraining
	}
	return execapi.ErrAtCapacity
}

// code is the API error code of the rejection.
func (e *RejectedError) code() string {
	switch e.Reason {
	case reasonKeyRate:
		return CodeRateLimited
	case reasonKeyConcurrency:
		return CodeConcurrencyLimit
	case reasonDraining:
		return CodeDraining
	default:
		return execapi.CodeAtCapacity
	}
}

// retryAfterSeconds rounds an estimate up to whole seconds, at least one:
// a client told to come back sooner than a slot can free would only be
// turned away again.
func retryAfterSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
