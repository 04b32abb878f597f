package execapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// RefusalReason says why a call was refused before anything of it ran.
type RefusalReason string

// Reasons of a Refusal. They are also the reason labels of the server's
// rejection metric, and what its error documents carry as "reason".
const (
	// RefusedAtCapacity: the executor's upper bound on calls running at
	// once (an operator's --capacity) was reached and no call ended within
	// the queue wait.
	RefusedAtCapacity RefusalReason = "at_capacity"
	// RefusedQueueFull: the call could not start at once and the queue of
	// calls waiting for room was full.
	RefusedQueueFull RefusalReason = "queue_full"
	// RefusedMemory: the memory the machine gives sandboxes was in use,
	// and not enough of it was freed within the queue wait.
	RefusedMemory RefusalReason = "memory"
	// RefusedCPU: the machine's CPUs stayed saturated (or busy starting
	// the sandboxes already admitted) for the whole queue wait.
	RefusedCPU RefusalReason = "cpu"
	// RefusedKeyRate: the caller's API key used up its runs per minute.
	RefusedKeyRate RefusalReason = "key_rate"
	// RefusedKeyConcurrency: the caller's API key has its maximum in flight.
	RefusedKeyConcurrency RefusalReason = "key_concurrency"
	// RefusedDraining: the server is shutting down.
	RefusedDraining RefusalReason = "draining"
	// RefusedUnknownRuntime: the executor has no such runtime (Field
	// "runtime"); another one might.
	RefusedUnknownRuntime RefusalReason = "unknown_runtime"
	// RefusedNoWorkers: a front end of a cluster has no live worker to
	// place the call on (none registered, or all stopped heartbeating).
	RefusedNoWorkers RefusalReason = "no_workers"
	// RefusedKeySessions: the caller's API key has its maximum of
	// sessions open (Limit); one must end before another opens.
	RefusedKeySessions RefusalReason = "key_sessions"
	// RefusedSessionsFull: the executor holds its maximum of sessions
	// open (Limit), of all callers.
	RefusedSessionsFull RefusalReason = "sessions_full"
	// RefusedSessionWorkerUnanswered: the cluster worker that holds the
	// session is registered but did not take the operation in time (busy,
	// or slow on the network); nothing ran, the session is not lost, and a
	// retry may reach it.
	RefusedSessionWorkerUnanswered RefusalReason = "session_worker_unanswered"
)

// AdmissionRefusals are the reasons an executor's admission refuses a call
// for (it had no room for it), as against a key's limits, draining or the
// request itself: what Info's AdmissionInfo counts.
var AdmissionRefusals = []RefusalReason{RefusedAtCapacity, RefusedQueueFull, RefusedMemory, RefusedCPU}

// Error codes of refusals, shared by every front end (HTTP error documents,
// the CLI's --request errors).
const (
	CodeRateLimited      = "rate_limited"
	CodeConcurrencyLimit = "concurrency_limited"
	CodeDraining         = "draining"
	CodeNoWorkers        = "no_workers"
	// CodeSessionWorkerUnanswered: a session's cluster worker did not take
	// the operation in time (HTTP 503, Retry-After).
	CodeSessionWorkerUnanswered = "session_worker_unanswered"
)

// ErrDraining is what a Refusal for RefusedDraining unwraps to.
var ErrDraining = errors.New("the server is shutting down and takes no new work")

// Refusal is a call refused before anything of it ran: every Executor
// returns one (as its error) for such a call, and every front end renders
// it, from its fields, without rewording: Error is the one wording. It
// survives JSON unchanged (MarshalJSON), so that an Executor that forwards
// calls (the HTTP client, a cluster's) passes it on as it got it.
//
// Refusals for capacity and key limits unwrap to ErrAtCapacity, draining to
// ErrDraining, and an unknown runtime to a *ValidationError naming Field.
type Refusal struct {
	Reason RefusalReason
	// RetryAfter estimates when a retry can succeed; zero when there is no
	// estimate (draining, an unknown runtime).
	RetryAfter time.Duration
	// Limit is the caller's limit that was hit: runs per minute for
	// RefusedKeyRate, requests in flight for RefusedKeyConcurrency.
	Limit int
	// Field names the request field at fault, for refusals about one.
	Field string
	// Detail is the executor's own account, for refusals about a field
	// (which runtimes are installed, say).
	Detail string
}

// Error is the one wording of a refusal: what was hit, and when to retry.
func (r *Refusal) Error() string {
	switch r.Reason {
	case RefusedAtCapacity:
		return "at capacity: every sandbox slot is busy. " + r.retry()
	case RefusedQueueFull:
		return "at capacity: no sandbox can start now and the queue of calls waiting for one is full. " + r.retry()
	case RefusedMemory:
		return "at capacity: the memory this machine gives sandboxes is in use and none was freed within the queue wait. " + r.retry()
	case RefusedCPU:
		return "at capacity: this machine's CPUs are saturated and did not free up within the queue wait. " + r.retry()
	case RefusedKeyRate:
		return fmt.Sprintf("this API key's limit of %d runs per minute is used up. %s", r.Limit, r.retry())
	case RefusedKeyConcurrency:
		return fmt.Sprintf("this API key already has %d requests in flight, its limit. %s", r.Limit, r.retry())
	case RefusedDraining:
		return ErrDraining.Error() + "; retry against another server or once it is back"
	case RefusedNoWorkers:
		return "no worker of the cluster is live to run the call. " + r.retry()
	case RefusedKeySessions:
		return fmt.Sprintf("this API key already has %d sessions open, its limit: close one, or wait for one to expire", r.Limit)
	case RefusedSessionWorkerUnanswered:
		return "the cluster worker that holds the session did not take the operation in time; nothing ran and the session is not lost. " + r.retry()
	case RefusedSessionsFull:
		return fmt.Sprintf("at capacity: this server holds its maximum of %d open sessions. %s", r.Limit, r.retry())
	}
	if r.Field != "" {
		return r.Field + ": " + r.Detail
	}
	return fmt.Sprintf("refused (%s). %s", r.Reason, r.retry())
}

// retry says when to try again.
func (r *Refusal) retry() string {
	if r.RetryAfter <= 0 {
		return "Retry in a few seconds"
	}
	if s := r.RetryAfterSeconds(); s != 1 {
		return fmt.Sprintf("Retry after %d seconds", s)
	}
	return "Retry after 1 second"
}

// RetryAfterSeconds rounds RetryAfter up to whole seconds, at least one, as
// Retry-After headers carry it: a client told to come back sooner than a
// slot can free would only be turned away again.
func (r *Refusal) RetryAfterSeconds() int {
	return max(int(math.Ceil(r.RetryAfter.Seconds())), 1)
}

// Unwrap lets errors.Is and errors.As treat a refusal as the errors callers
// already handle: ErrAtCapacity, ErrDraining, a *ValidationError.
func (r *Refusal) Unwrap() error {
	switch r.Reason {
	case RefusedDraining:
		return ErrDraining
	case RefusedUnknownRuntime:
		return &ValidationError{Field: r.Field, Message: r.Detail}
	case RefusedAtCapacity, RefusedQueueFull, RefusedMemory, RefusedCPU, RefusedKeyRate, RefusedKeyConcurrency, RefusedSessionsFull:
		return ErrAtCapacity
	case RefusedKeySessions:
		// Not capacity that frees by itself shortly: the caller's own
		// sessions hold it.
		return ErrSessionLimit
	}
	if r.Field != "" {
		return &ValidationError{Field: r.Field, Message: r.Detail}
	}
	return nil
}

// Code is the API error code the refusal is answered with.
func (r *Refusal) Code() string {
	switch r.Reason {
	case RefusedAtCapacity, RefusedQueueFull, RefusedMemory, RefusedCPU, RefusedSessionsFull:
		return CodeAtCapacity
	case RefusedKeySessions:
		return CodeSessionLimit
	case RefusedKeyRate:
		return CodeRateLimited
	case RefusedKeyConcurrency:
		return CodeConcurrencyLimit
	case RefusedDraining:
		return CodeDraining
	case RefusedNoWorkers:
		return CodeNoWorkers
	case RefusedSessionWorkerUnanswered:
		return CodeSessionWorkerUnanswered
	case RefusedUnknownRuntime:
		return CodeInvalidRequest
	}
	if r.Field != "" {
		return CodeInvalidRequest
	}
	return string(r.Reason)
}

// refusalJSON is a Refusal on the wire, RetryAfter in milliseconds.
type refusalJSON struct {
	Reason       RefusalReason `json:"reason"`
	RetryAfterMS int64         `json:"retry_after_ms,omitempty"`
	Limit        int           `json:"limit,omitempty"`
	Field        string        `json:"field,omitempty"`
	Detail       string        `json:"detail,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (r Refusal) MarshalJSON() ([]byte, error) {
	return json.Marshal(refusalJSON{Reason: r.Reason, RetryAfterMS: r.RetryAfter.Milliseconds(), Limit: r.Limit, Field: r.Field, Detail: r.Detail})
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Refusal) UnmarshalJSON(data []byte) error {
	var w refusalJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*r = Refusal{Reason: w.Reason, RetryAfter: time.Duration(w.RetryAfterMS) * time.Millisecond, Limit: w.Limit, Field: w.Field, Detail: w.Detail}
	return nil
}
