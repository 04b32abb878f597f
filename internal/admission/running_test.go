package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// A call into a running sandbox is admitted while the memory budget has
// no room for a new sandbox's floor, and reserves none itself: the memory
// it uses is in the gauge already.
func TestRunningCallsNeedNoMemoryFloor(t *testing.T) {
	var used atomic.Int64
	used.Store(95 * mib)
	c := newController(t, Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib, QueueWait: -1},
		Gauges{Memory: used.Load})
	if _, err := c.Acquire(context.Background(), "A", time.Second); refusalOf(t, err).Reason != execapi.RefusedMemory {
		t.Fatalf("a new sandbox with 95 of 100 MB in use: %v", err)
	}
	tk, err := c.AcquireRunning(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatalf("a call into a running sandbox: %v", err)
	}
	if i := c.Info(); i.Running != 1 || i.Starting != 0 || i.MemoryReservedBytes != 95*mib {
		t.Errorf("with the call admitted: %+v", i)
	}
	tk.Release(time.Second)
	if i := c.Info(); i.Running != 0 || i.Starting != 0 {
		t.Errorf("after release: %+v", i)
	}
}

// Capacity holds for calls into running sandboxes as for any: one takes a
// slot, and none is admitted beyond the bound.
func TestRunningCallsCountTowardCapacity(t *testing.T) {
	c := newController(t, Settings{Capacity: 1, QueueWait: -1}, Gauges{})
	tk, err := c.AcquireRunning(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(context.Background(), "B", time.Second); refusalOf(t, err).Reason != execapi.RefusedAtCapacity {
		t.Errorf("a new call beside a running one at capacity 1: %v", err)
	}
	if _, err := c.AcquireRunning(context.Background(), "B", time.Second); refusalOf(t, err).Reason != execapi.RefusedAtCapacity {
		t.Errorf("a second running call at capacity 1: %v", err)
	}
	tk.Release(0)
}

// A call into a running sandbox does not wait behind calls that wait for
// memory: at once when it arrives, and as soon as a slot frees when it
// had to queue for capacity; the call that needs memory keeps waiting.
func TestRunningCallsPassCallsWaitingForMemory(t *testing.T) {
	var used atomic.Int64
	used.Store(95 * mib)
	c := newController(t, Settings{Capacity: 2, MemoryBudget: 100 * mib, CallFloor: 10 * mib, MaxQueue: 10, QueueWait: 10 * time.Second},
		Gauges{Memory: used.Load})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan outcome, 4)
	queueUp(t, c, ctx, "A", got) // a new sandbox: waits for memory
	waitFor(t, "blocked for memory", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.blocked == execapi.RefusedMemory
	})
	held, err := c.AcquireRunning(ctx, "B", time.Second)
	if err != nil {
		t.Fatalf("behind a call waiting for memory: %v", err)
	}
	other, err := c.AcquireRunning(ctx, "C", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// At capacity now: a third running call queues for a slot.
	queued := make(chan error, 1)
	go func() {
		tk, err := c.AcquireRunning(ctx, "D", time.Second)
		if err == nil {
			tk.Release(0)
		}
		queued <- err
	}()
	waitFor(t, "queued", func() bool { q, _ := c.snapshot(); return q == 2 })
	held.Release(time.Second)
	if err := <-queued; err != nil {
		t.Errorf("a queued running call once a slot freed: %v", err)
	}
	other.Release(0)
	cancel()
	// Cancelled (or, on a slow machine, refused after its wait): never
	// admitted while the memory was in use.
	if o := <-got; o.ticket != nil || !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("the call that needs memory was let in: %+v", o)
	}
}

// The starting allowance bounds sandboxes being made ready at once; a
// call into a running one starts nothing and is not held to it.
func TestRunningCallsSkipTheStartingAllowance(t *testing.T) {
	c := newController(t, Settings{CPUThreshold: 0.8, MinStarting: 1, QueueWait: -1, Settle: time.Hour}, Gauges{CPU: &fakeCPU{}})
	starting, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(context.Background(), "A", time.Second); refusalOf(t, err).Reason != execapi.RefusedCPU {
		t.Errorf("a second new sandbox with the allowance used: %v", err)
	}
	tk, err := c.AcquireRunning(context.Background(), "A", time.Second)
	if err != nil {
		t.Errorf("a call into a running sandbox: %v", err)
	} else {
		tk.Release(0)
	}
	starting.Release(0)
}
