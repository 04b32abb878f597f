package httpapi

import (
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Rejection reasons beyond the refusals of execapi (execapi.RefusalReason):
// the labels of scratchrun_rejections_total.
const (
	reasonUnauthorized   = "unauthorized"           // no or a bad API key
	reasonInvalidRequest = "invalid_request"        // decoding or validation failed
	reasonBodyTooLarge   = "body_too_large"         // the body exceeded the maximum
	reasonForbidden      = "forbidden"              // a foreign Origin or a Host a loopback server does not answer to
	reasonMediaType      = "unsupported_media_type" // a body that is not declared application/json
)

const (
	defaultRunEstimate = time.Second     // expected run length before any run has finished
	estimateSmoothing  = 0.2             // weight of the newest run in the running average
	teardownAllowance  = 2 * time.Second // a run may outlive its timeout by teardown
	minimumRetryAfter  = time.Second     // Retry-After is whole seconds, at least one
)

// inFlight counts the gate's calls (waiting for admission or running), per
// caller, for the keys' concurrency limits and for draining. Whether a
// call may start is the engine's admission; how many one key may have
// going at once is the gate's (issue 16 makes it cluster-wide).
type inFlight struct {
	mu     sync.Mutex
	calls  map[string]map[*flight]struct{} // caller -> its calls
	total  int
	avg    time.Duration // running average of run lengths, for estimates
	onIdle chan struct{} // closed and replaced when total reaches 0
}

// flight is one call in the gate.
type flight struct {
	caller  string
	timeout time.Duration
	entered time.Time
}

func newInFlight() *inFlight {
	return &inFlight{calls: map[string]map[*flight]struct{}{}, avg: defaultRunEstimate, onIdle: make(chan struct{})}
}

// enter counts a call of caller, unless the caller already has limit calls
// in flight (limit > 0): then it returns the refusal, with when the
// caller's earliest call should end.
func (f *inFlight) enter(caller string, limit int, timeout time.Duration) (*flight, *execapi.Refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mine := f.calls[caller]
	if limit > 0 && len(mine) >= limit {
		return nil, &execapi.Refusal{Reason: execapi.RefusedKeyConcurrency, RetryAfter: f.earliestEndLocked(mine), Limit: limit}
	}
	if mine == nil {
		mine = map[*flight]struct{}{}
		f.calls[caller] = mine
	}
	fl := &flight{caller: caller, timeout: timeout, entered: time.Now()}
	mine[fl] = struct{}{}
	f.total++
	return fl, nil
}

// leave uncounts a call; ran is how long it ran (0 when it did not).
func (f *inFlight) leave(fl *flight, ran time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mine := f.calls[fl.caller]
	if _, ok := mine[fl]; !ok {
		return
	}
	delete(mine, fl)
	if len(mine) == 0 {
		delete(f.calls, fl.caller)
	}
	f.total--
	if ran > 0 {
		f.avg = time.Duration(estimateSmoothing*float64(ran) + (1-estimateSmoothing)*float64(f.avg))
	}
	if f.total == 0 {
		close(f.onIdle)
		f.onIdle = make(chan struct{})
	}
}

// earliestEndLocked estimates when the first of calls ends: the average
// run minus what it has had, never more than its timeout (plus teardown)
// allows, at least a second.
func (f *inFlight) earliestEndLocked(calls map[*flight]struct{}) time.Duration {
	now := time.Now()
	best := time.Duration(-1)
	for fl := range calls {
		elapsed := now.Sub(fl.entered)
		left := f.avg - elapsed
		if bound := fl.timeout + teardownAllowance - elapsed; left > bound {
			left = bound
		}
		if best < 0 || left < best {
			best = left
		}
	}
	return max(best, minimumRetryAfter)
}

// count is how many calls are in the gate.
func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// waitIdle returns once no call is in the gate, or stop is closed.
func (f *inFlight) waitIdle(stop <-chan struct{}) {
	for {
		f.mu.Lock()
		total, idle := f.total, f.onIdle
		f.mu.Unlock()
		if total == 0 {
			return
		}
		select {
		case <-idle:
		case <-stop:
			return
		}
	}
}
