package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// These check that a call never stands for long on readings the sampler
// took before it rested (found by review: each failed on the first
// version of the sampler).

// With no queue (a worker; serve --queue-wait 0), after a CPU-bound burst
// whose last look read the CPUs saturated, the sampler rests; once the
// CPUs are idle, calls are admitted again, not refused for cpu forever on
// the old reading.
func TestNoQueueCallsAreNotRefusedOnAnOldSaturation(t *testing.T) {
	cpu := &fakeCPU{}
	c := newController(t, Settings{CPUThreshold: 0.9, QueueWait: -1, Settle: 3 * time.Millisecond}, Gauges{CPU: cpu})
	start := time.Now()
	busy := func() (time.Duration, bool) { return time.Since(start), true } // computes all the time
	tk, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tk.Started(busy)
	waitFor(t, "CPU-bound", func() bool { _, _, _, b, _ := c.state(); return b == 1 })
	cpu.set(1) // the burst saturates the CPUs
	waitFor(t, "a look that read the saturation", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.gauges.pressure == 1
	})
	tk.Release(time.Second)
	cpu.set(0) // idle from now on
	// A call may still meet the old reading once (a look slower than an
	// Acquire's short wait for it, on a loaded machine); it must not go on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk, err := c.Acquire(context.Background(), "B", time.Second)
		if err == nil {
			tk.Release(0)
			return
		}
		var r *execapi.Refusal
		if !errors.As(err, &r) || r.Reason != execapi.RefusedCPU {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("calls refused for cpu for 10 s on an idle machine: the old reading is never refreshed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With no queue, memory that grew while the sampler rested is seen
// before a call is admitted on the old, lower reading.
func TestNoQueueCallsSeeMemoryThatGrewMeanwhile(t *testing.T) {
	var used atomic.Int64
	c := newController(t, Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib, QueueWait: -1}, Gauges{Memory: used.Load})
	used.Store(95 * mib)     // sessions or other engines grew: 95 of 100 MiB in use
	time.Sleep(3 * maxStale) // the readings are old: the sampler rests
	tk, err := c.Acquire(context.Background(), "A", time.Second)
	if err == nil {
		t.Errorf("admitted with 95 MiB of 100 in use and a 10 MiB floor")
		tk.Release(0)
	} else if r := refusalOf(t, err); r.Reason != execapi.RefusedMemory {
		t.Errorf("refused for %s, want memory", r.Reason)
	}
}

// A resident call whose Started lands while the sampler is in a look is
// still read: it computes, so it comes to count as CPU-bound.
func TestResidentStartedDuringALookIsRead(t *testing.T) {
	cpu := &fakeCPU{}
	gate := make(chan struct{})
	entered := make(chan struct{}, 100)
	slow := func() (time.Duration, bool) {
		entered <- struct{}{}
		<-gate
		return 0, true
	}
	c := newController(t, Settings{CPUThreshold: 0.9, Settle: 3 * time.Millisecond}, Gauges{CPU: cpu})
	// A call whose meter blocks holds the sampler in a look.
	a, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.Started(slow)
	<-entered
	r, err := c.AcquireRunning(context.Background(), "S", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var reads atomic.Int64
	r.Started(func() (time.Duration, bool) { reads.Add(1); return time.Since(start), true }) // computes
	a.Release(0)                                                                             // A ends while its reading is in flight
	close(gate)
	waitFor(t, "the session call read and seen computing", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return reads.Load() > 0 && c.cpuBound == 1
	})
	r.Release(0)
}

// With no queue, sessions opened one after another (each opening call
// released before any job: the floor stays until memory is read) while
// nothing else runs: each floor gets its reading, so they do not pile up
// into refusals with nothing in use.
func TestSessionOpeningFloorsAreReadAway(t *testing.T) {
	c := newController(t, Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib, QueueWait: -1},
		Gauges{Memory: func() int64 { return 0 }})
	for i := range 20 {
		tk, err := c.Acquire(context.Background(), "A", time.Second)
		if err != nil {
			t.Fatalf("session open %d refused with nothing in use: %v", i, err)
		}
		tk.Release(0)
		waitFor(t, "the floor read away", func() bool { _, _, unmeasured, _, _ := c.state(); return unmeasured == 0 })
	}
}
