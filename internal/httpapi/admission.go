package httpapi

import (
	"container/list"
	"context"
	"sort"
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
	defaultRunEstimate   = time.Second              // expected run length before any run has finished
	estimateSmoothing    = 0.2                      // weight of the newest run in the running average
	teardownAllowance    = 2 * time.Second          // a run may outlive its timeout by teardown
	minimumRetryAfter    = time.Second              // Retry-After is whole seconds, at least one
)

// admission hands out the engine's sandbox slots. A request gets a slot at
// once when one is free and nobody is waiting; otherwise it waits in its
// caller's FIFO queue, and each freed slot goes to the next caller in
// round-robin order, so one caller with many queued requests delays others by
// at most one run per round. Waiting is bounded in time (queueWait) and in
// length (maxQueue): beyond either, the request is rejected with an estimate
// of when a slot will be free, computed from the runs in flight.
type admission struct {
	capacity  int
	maxQueue  int
	queueWait time.Duration

	mu      sync.Mutex
	inUse   int
	queued  int
	queues  map[string]*list.List // caller -> FIFO of *waiter
	ring    []string              // callers with a non-empty queue, in service order
	next    int                   // index into ring of the caller served next
	running map[*ticket]struct{}
	avg     time.Duration // running average of run lengths
	onDepth func(queued, inUse int)
}

// ticket is one admitted (or waiting) request.
type ticket struct {
	caller   string
	timeout  time.Duration // the run's own limit, to bound estimates
	started  time.Time     // when the slot was granted
	ready    chan struct{} // closed when the slot is granted
	granted  bool
	elem     *list.Element
	released bool
}

func newAdmission(capacity, maxQueue int, queueWait time.Duration, onDepth func(queued, inUse int)) *admission {
	if onDepth == nil {
		onDepth = func(int, int) {}
	}
	return &admission{
		capacity: capacity, maxQueue: maxQueue, queueWait: queueWait,
		queues: map[string]*list.List{}, running: map[*ticket]struct{}{},
		avg: defaultRunEstimate, onDepth: onDepth,
	}
}

// acquire waits for a slot for caller. It returns a ticket to release, or a
// refusal, or ctx's error when the caller went away while waiting. (A key's
// own concurrency is not counted here but in the key store, across every
// front end: see gate.admitKey.)
func (a *admission) acquire(ctx context.Context, caller string, timeout time.Duration) (*ticket, *execapi.Refusal, error) {
	a.mu.Lock()
	t := &ticket{caller: caller, timeout: timeout, ready: make(chan struct{})}
	if a.inUse < a.capacity && a.queued == 0 {
		a.grantLocked(t)
		a.reportLocked()
		a.mu.Unlock()
		return t, nil, nil
	}
	if a.maxQueue <= 0 || a.queueWait <= 0 || a.queued >= a.maxQueue {
		r := &execapi.Refusal{Reason: execapi.RefusedQueueFull, RetryAfter: a.estimateLocked(a.queued)}
		if a.maxQueue <= 0 || a.queueWait <= 0 {
			r.Reason = execapi.RefusedAtCapacity // there is no queue to be full
		}
		a.mu.Unlock()
		return nil, r, nil
	}
	a.enqueueLocked(t)
	a.reportLocked()
	a.mu.Unlock()

	timer := time.NewTimer(a.queueWait)
	defer timer.Stop()
	select {
	case <-t.ready:
		return t, nil, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.granted {
		// The slot came as the wait ended: use it, unless the caller is gone.
		if ctx.Err() != nil {
			a.releaseLocked(t, 0)
			return nil, nil, ctx.Err()
		}
		return t, nil, nil
	}
	a.dequeueLocked(t)
	a.reportLocked()
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return nil, &execapi.Refusal{Reason: execapi.RefusedAtCapacity, RetryAfter: a.estimateLocked(a.queued)}, nil
}

// release returns t's slot; ran is how long the run took (0 when it did not
// run), which feeds the estimate of later runs.
func (a *admission) release(t *ticket, ran time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(t, ran)
}

func (a *admission) releaseLocked(t *ticket, ran time.Duration) {
	if t.released {
		return
	}
	t.released = true
	delete(a.running, t)
	a.inUse--
	if ran > 0 {
		a.avg = time.Duration(estimateSmoothing*float64(ran) + (1-estimateSmoothing)*float64(a.avg))
	}
	a.dispatchLocked()
	a.reportLocked()
}

// dispatchLocked gives free slots to waiting callers in round-robin order.
func (a *admission) dispatchLocked() {
	for a.inUse < a.capacity && a.queued > 0 {
		if a.next >= len(a.ring) {
			a.next = 0
		}
		caller := a.ring[a.next]
		q := a.queues[caller]
		t := q.Remove(q.Front()).(*ticket)
		t.elem = nil
		a.queued--
		if q.Len() == 0 {
			delete(a.queues, caller)
			a.ring = append(a.ring[:a.next], a.ring[a.next+1:]...)
			// a.next now points at the caller after this one.
		} else {
			a.next++
		}
		a.grantLocked(t)
		close(t.ready)
	}
}

func (a *admission) grantLocked(t *ticket) {
	t.granted = true
	t.started = time.Now()
	a.inUse++
	a.running[t] = struct{}{}
}

func (a *admission) enqueueLocked(t *ticket) {
	q := a.queues[t.caller]
	if q == nil {
		q = list.New()
		a.queues[t.caller] = q
		// A caller new to the ring is served after everyone already waiting.
		if a.next == 0 {
			a.ring = append(a.ring, t.caller)
		} else {
			a.ring = append(a.ring[:a.next], append([]string{t.caller}, a.ring[a.next:]...)...)
			a.next++
		}
	}
	t.elem = q.PushBack(t)
	a.queued++
}

func (a *admission) dequeueLocked(t *ticket) {
	q := a.queues[t.caller]
	if q == nil || t.elem == nil {
		return
	}
	q.Remove(t.elem)
	t.elem = nil
	a.queued--
	if q.Len() > 0 {
		return
	}
	delete(a.queues, t.caller)
	for i, c := range a.ring {
		if c == t.caller {
			a.ring = append(a.ring[:i], a.ring[i+1:]...)
			if i < a.next {
				a.next--
			}
			break
		}
	}
}

// remainingLocked estimates, for each running slot and each free one, how
// long until it is free: the average run length minus what the run has used,
// never more than what its timeout (plus teardown) allows. Sorted ascending.
func (a *admission) remainingLocked(now time.Time) []time.Duration {
	rem := make([]time.Duration, 0, a.capacity)
	for t := range a.running {
		elapsed := now.Sub(t.started)
		left := a.avg - elapsed
		if bound := t.timeout + teardownAllowance - elapsed; left > bound {
			left = bound
		}
		if left < 0 {
			left = 0
		}
		rem = append(rem, left)
	}
	for len(rem) < a.capacity {
		rem = append(rem, 0)
	}
	sort.Slice(rem, func(i, j int) bool { return rem[i] < rem[j] })
	return rem
}

// estimateLocked is how long a request with ahead requests queued before it
// would wait: the slots free in the order estimated, then whole rounds of
// average runs for everyone ahead.
func (a *admission) estimateLocked(ahead int) time.Duration {
	if a.capacity <= 0 {
		return minimumRetryAfter
	}
	rem := a.remainingLocked(time.Now())
	d := rem[ahead%a.capacity] + time.Duration(ahead/a.capacity)*a.avg
	if d < minimumRetryAfter {
		d = minimumRetryAfter
	}
	return d
}

// waitIdle returns once nothing is queued or running, or stop is closed.
func (a *admission) waitIdle(stop <-chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if q, u := a.snapshot(); q == 0 && u == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// snapshot returns the queue length and slots in use.
func (a *admission) snapshot() (queued, inUse int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queued, a.inUse
}

func (a *admission) reportLocked() { a.onDepth(a.queued, a.inUse) }
