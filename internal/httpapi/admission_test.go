package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// These exercise the admission queue on its own (no sandboxes): order,
// bounds and estimates.

// queueUp starts acquire for caller in the background and waits until it is
// queued, so that arrival order is exact.
func queueUp(t *testing.T, a *admission, ctx context.Context, caller string, got chan<- string) {
	t.Helper()
	before, _ := a.snapshot()
	go func() {
		tk, rej, err := a.acquire(ctx, caller, time.Second)
		switch {
		case err != nil:
			got <- caller + ":" + err.Error()
		case rej != nil:
			got <- caller + ":" + string(rej.Reason)
		default:
			got <- caller
			// Hold the slot until the test releases it through the channel
			// order; the test calls release via held.
			held <- tk
		}
	}()
	waitFor(t, "queued", func() bool { q, _ := a.snapshot(); return q == before+1 })
}

var held = make(chan *ticket, 100)

// Freed slots go round-robin across callers with waiting requests, each
// caller's own requests in arrival order.
func TestAdmissionRoundRobin(t *testing.T) {
	a := newAdmission(1, 100, time.Minute, nil)
	first, rej, err := a.acquire(context.Background(), "A", time.Second)
	if first == nil || rej != nil || err != nil {
		t.Fatalf("first acquire: %v %v", rej, err)
	}
	got := make(chan string, 100)
	for _, c := range []string{"A", "A", "A", "B", "C", "B"} {
		queueUp(t, a, context.Background(), c, got)
	}
	var order []string
	a.release(first, 0)
	for range 6 {
		order = append(order, <-got)
		a.release(<-held, 0)
	}
	want := []string{"A", "B", "C", "A", "B", "A"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("service order %v, want %v", order, want)
		}
	}
	if q, u := a.snapshot(); q != 0 || u != 0 {
		t.Errorf("after all: queued %d in use %d", q, u)
	}
}

// A caller that goes away while queued leaves the queue, and the slot goes
// to the next one.
func TestAdmissionCancelWhileQueued(t *testing.T) {
	a := newAdmission(1, 100, time.Minute, nil)
	first, _, _ := a.acquire(context.Background(), "A", time.Second)
	got := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	queueUp(t, a, ctx, "B", got)
	queueUp(t, a, context.Background(), "C", got)
	cancel()
	if r := <-got; r != "B:"+context.Canceled.Error() {
		t.Fatalf("cancelled waiter: %q", r)
	}
	if q, _ := a.snapshot(); q != 1 {
		t.Fatalf("queued %d after a cancel, want 1", q)
	}
	a.release(first, 0)
	if r := <-got; r != "C" {
		t.Fatalf("next: %q", r)
	}
	a.release(<-held, 0)
	if len(a.ring) != 0 || len(a.queues) != 0 {
		t.Errorf("state left: ring %v queues %d", a.ring, len(a.queues))
	}
}

// Waiting is bounded by the queue wait; the rejection carries an estimate of
// at least a second that accounts for the work ahead.
func TestAdmissionWaitAndEstimates(t *testing.T) {
	a := newAdmission(2, 100, 50*time.Millisecond, nil)
	t1, _, _ := a.acquire(context.Background(), "A", 10*time.Second)
	t2, _, _ := a.acquire(context.Background(), "A", 10*time.Second)
	start := time.Now()
	_, rej, err := a.acquire(context.Background(), "B", time.Second)
	if err != nil || rej == nil || rej.Reason != execapi.RefusedAtCapacity {
		t.Fatalf("over capacity: %v %v", rej, err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("waited %s with a 50 ms queue wait", d)
	}
	if rej.RetryAfter < time.Second {
		t.Errorf("estimate %s: below a second", rej.RetryAfter)
	}
	// Slow runs raise the estimate; it never exceeds what timeouts allow.
	a.mu.Lock()
	a.avg = 8 * time.Second
	early := a.estimateLocked(0)
	later := a.estimateLocked(5)
	a.mu.Unlock()
	if early > 10*time.Second+teardownAllowance || later <= early {
		t.Errorf("estimates: first in line %s, sixth %s", early, later)
	}
	a.release(t1, time.Second)
	a.release(t2, time.Second)
	a.release(t2, time.Second) // a second release is harmless
	if _, u := a.snapshot(); u != 0 {
		t.Errorf("in use %d after releases", u)
	}
	// No queue at all: rejected at once as at capacity.
	none := newAdmission(1, 100, -1, nil)
	hold, _, _ := none.acquire(context.Background(), "A", time.Second)
	if _, rej, _ := none.acquire(context.Background(), "A", time.Second); rej == nil || rej.Reason != execapi.RefusedAtCapacity {
		t.Errorf("without a queue: %+v", rej)
	}
	none.release(hold, 0)
}

// Every refusal of the gate says when to retry, rounded up to whole
// seconds, and unwraps to what callers test for: ErrAtCapacity, or
// ErrDraining while draining.
func TestRejectionErrors(t *testing.T) {
	for _, r := range []execapi.RefusalReason{execapi.RefusedAtCapacity, execapi.RefusedQueueFull, execapi.RefusedKeyRate,
		execapi.RefusedKeyConcurrency, execapi.RefusedDraining} {
		err := error(&execapi.Refusal{Reason: r, RetryAfter: 1500 * time.Millisecond, Limit: 3})
		if r == execapi.RefusedDraining {
			if !errors.Is(err, execapi.ErrDraining) {
				t.Errorf("%s does not wrap ErrDraining", r)
			}
			continue
		}
		if !errors.Is(err, errAtCapacity()) || !containsAll(err.Error(), "Retry after 2 seconds") {
			t.Errorf("%s: %v", r, err)
		}
	}
}
