package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// These exercise the fair queue and its bounds with a capacity alone (no
// gauges): order, bounds and estimates. They moved here from the HTTP
// gate with the queue.

// snapshot returns the calls waiting and running.
func (c *Controller) snapshot() (waiting, running int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue.len(), len(c.running)
}

// waitFor polls cond until it holds; the bound only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// outcome is what one queued Acquire came to: the caller's name, or
// "caller:reason" for a refusal or an error.
type outcome struct {
	name   string
	ticket *Ticket
}

// queueUp starts Acquire for caller in the background and waits until it is
// queued, so that arrival order is exact.
func queueUp(t *testing.T, c *Controller, ctx context.Context, caller string, got chan<- outcome) {
	t.Helper()
	before, _ := c.snapshot()
	go func() {
		tk, err := c.Acquire(ctx, caller, time.Second)
		var r *execapi.Refusal
		switch {
		case errors.As(err, &r):
			got <- outcome{name: caller + ":" + string(r.Reason)}
		case err != nil:
			got <- outcome{name: caller + ":" + err.Error()}
		default:
			got <- outcome{name: caller, ticket: tk}
		}
	}()
	waitFor(t, "queued", func() bool { q, _ := c.snapshot(); return q == before+1 })
}

func newController(t *testing.T, s Settings, g Gauges) *Controller {
	t.Helper()
	c := New(s, g)
	t.Cleanup(c.Close)
	return c
}

// Admitted room goes round-robin across callers with waiting calls, each
// caller's own calls in arrival order.
func TestQueueRoundRobin(t *testing.T) {
	c := newController(t, Settings{Capacity: 1, MaxQueue: 100, QueueWait: time.Minute}, Gauges{})
	first, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan outcome, 100)
	for _, caller := range []string{"A", "A", "A", "B", "C", "B"} {
		queueUp(t, c, context.Background(), caller, got)
	}
	var order []string
	first.Release(0)
	for range 6 {
		o := <-got
		order = append(order, o.name)
		o.ticket.Release(0)
	}
	want := []string{"A", "B", "C", "A", "B", "A"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("service order %v, want %v", order, want)
		}
	}
	if q, u := c.snapshot(); q != 0 || u != 0 {
		t.Errorf("after all: waiting %d running %d", q, u)
	}
}

// A caller that goes away while queued leaves the queue, and the room goes
// to the next one.
func TestQueueCancelWhileWaiting(t *testing.T) {
	c := newController(t, Settings{Capacity: 1, MaxQueue: 100, QueueWait: time.Minute}, Gauges{})
	first, _ := c.Acquire(context.Background(), "A", time.Second)
	got := make(chan outcome, 10)
	ctx, cancel := context.WithCancel(context.Background())
	queueUp(t, c, ctx, "B", got)
	queueUp(t, c, context.Background(), "C", got)
	cancel()
	if o := <-got; o.name != "B:"+context.Canceled.Error() {
		t.Fatalf("cancelled waiter: %q", o.name)
	}
	if q, _ := c.snapshot(); q != 1 {
		t.Fatalf("waiting %d after a cancel, want 1", q)
	}
	first.Release(0)
	o := <-got
	if o.name != "C" {
		t.Fatalf("next: %q", o.name)
	}
	o.ticket.Release(0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue.ring) != 0 || len(c.queue.queues) != 0 || c.starting != 0 {
		t.Errorf("state left: ring %v queues %d starting %d", c.queue.ring, len(c.queue.queues), c.starting)
	}
}

// Waiting is bounded by the queue wait; the refusal carries an estimate of
// at least a second that accounts for the work ahead. A full queue refuses
// at once, and without a queue a call is refused at once too.
func TestQueueWaitAndEstimates(t *testing.T) {
	c := newController(t, Settings{Capacity: 2, MaxQueue: 100, QueueWait: 50 * time.Millisecond}, Gauges{})
	t1, _ := c.Acquire(context.Background(), "A", 10*time.Second)
	t2, _ := c.Acquire(context.Background(), "A", 10*time.Second)
	start := time.Now()
	_, err := c.Acquire(context.Background(), "B", time.Second)
	var r *execapi.Refusal
	if !errors.As(err, &r) || r.Reason != execapi.RefusedAtCapacity {
		t.Fatalf("over capacity: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("waited %s with a 50 ms queue wait", d)
	}
	if r.RetryAfter < time.Second {
		t.Errorf("estimate %s: below a second", r.RetryAfter)
	}
	// Slow runs raise the estimate; it never exceeds what timeouts allow.
	c.mu.Lock()
	c.avg = 8 * time.Second
	early := c.estimateLocked(0, time.Now())
	later := c.estimateLocked(5, time.Now())
	c.mu.Unlock()
	if early > 10*time.Second+teardownAllowance || later <= early {
		t.Errorf("estimates: first in line %s, sixth %s", early, later)
	}
	t1.Release(time.Second)
	t2.Release(time.Second)
	t2.Release(time.Second) // a second release is harmless
	if _, u := c.snapshot(); u != 0 {
		t.Errorf("running %d after releases", u)
	}

	full := newController(t, Settings{Capacity: 1, MaxQueue: 1, QueueWait: time.Minute}, Gauges{})
	hold, _ := full.Acquire(context.Background(), "A", time.Second)
	got := make(chan outcome, 1)
	queueUp(t, full, context.Background(), "B", got)
	start = time.Now()
	if _, err := full.Acquire(context.Background(), "C", time.Second); !errors.As(err, &r) || r.Reason != execapi.RefusedQueueFull {
		t.Errorf("beyond a full queue: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a full queue made the call wait %s", time.Since(start))
	}
	hold.Release(0)
	(<-got).ticket.Release(0)

	none := newController(t, Settings{Capacity: 1, QueueWait: -1}, Gauges{})
	hold, _ = none.Acquire(context.Background(), "A", time.Second)
	if _, err := none.Acquire(context.Background(), "A", time.Second); !errors.As(err, &r) || r.Reason != execapi.RefusedAtCapacity {
		t.Errorf("without a queue: %v", err)
	}
	hold.Release(0)
	if n := none.Info().Rejections[execapi.RefusedAtCapacity]; n != 1 {
		t.Errorf("rejections counted %d, want 1", n)
	}
}

// Without a queue wait (the zero Settings) a call waits as long as its
// context allows, as an engine without servers' settings always did.
func TestQueueWaitsForTheContext(t *testing.T) {
	c := newController(t, Settings{Capacity: 1}, Gauges{})
	hold, _ := c.Acquire(context.Background(), "A", time.Second)
	got := make(chan outcome, 1)
	queueUp(t, c, context.Background(), "B", got)
	time.Sleep(100 * time.Millisecond)
	select {
	case o := <-got:
		t.Fatalf("a call without a queue wait ended waiting: %q", o.name)
	default:
	}
	hold.Release(0)
	if o := <-got; o.name != "B" {
		t.Fatalf("after the room freed: %q", o.name)
	} else {
		o.ticket.Release(0)
	}
}
