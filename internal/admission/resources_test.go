package admission

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// These drive the resource conditions with gauges the test sets: memory in
// use, and CPU pressure and busyness.

const mib = 1 << 20

// fakeCPU is a CPU gauge the test drives.
type fakeCPU struct {
	mu sync.Mutex
	r  CPUReading
}

func (f *fakeCPU) CPU() CPUReading { f.mu.Lock(); defer f.mu.Unlock(); return f.r }
func (f *fakeCPU) set(pressure float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.r = CPUReading{Pressure: pressure}
}

func refusalOf(t *testing.T, err error) *execapi.Refusal {
	t.Helper()
	var r *execapi.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("want a refusal, got %v", err)
	}
	return r
}

// Calls beyond the memory budget wait in the queue and are then refused
// for memory, with when to retry; what the sandboxes use (the gauge) and
// a floor for each call not yet measured both count; and a call waiting
// starts as soon as memory frees.
func TestMemoryBudgetQueuesThenRefuses(t *testing.T) {
	var used atomic.Int64
	used.Store(75 * mib)
	c := newController(t, Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib, MaxQueue: 10, QueueWait: 100 * time.Millisecond},
		Gauges{Memory: used.Load})
	// 75 in use + 10 for this call's floor fits; so does a second (95).
	a, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// 75 + two floors + this one's: over.
	start := time.Now()
	_, err = c.Acquire(context.Background(), "B", time.Second)
	r := refusalOf(t, err)
	if r.Reason != execapi.RefusedMemory || r.RetryAfter < time.Second {
		t.Errorf("beyond the budget: %+v", r)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("refused after %s, before the queue wait", time.Since(start))
	}
	if !errors.Is(err, execapi.ErrAtCapacity) || !containsAll(err.Error(), "memory", "Retry after") {
		t.Errorf("wording: %v", err)
	}
	info := c.Info()
	if info.MemoryBudgetBytes != 100*mib || info.MemoryUsedBytes != 75*mib || info.MemoryReservedBytes != 95*mib ||
		info.Free != 0 || info.Running != 2 || info.Starting != 2 || info.Rejections[execapi.RefusedMemory] != 1 {
		t.Errorf("info: %+v", info)
	}
	// Once measured, a call counts by what it uses, not by its floor.
	a.Started(nil)
	b.Started(nil)
	waitFor(t, "settled", func() bool { return c.Info().Starting == 0 })
	used.Store(80 * mib) // the two use 5 MB between them
	waiting := make(chan error, 1)
	go func() {
		tk, err := c.Acquire(context.Background(), "B", time.Second)
		if err == nil {
			tk.Release(0)
		}
		waiting <- err
	}()
	if err := <-waiting; err != nil {
		t.Errorf("with 80 of 100 MB in use: %v", err)
	}
	a.Release(time.Second)
	b.Release(time.Second)
	if i := c.Info(); i.Running != 0 || i.Starting != 0 || i.Waiting != 0 {
		t.Errorf("after release: %+v", i)
	}
}

// Before a call is refused for memory the controller asks for idle warm
// sandboxes to be released (Reclaim), and the call starts once they are.
func TestMemoryReclaimBeforeRefusing(t *testing.T) {
	var used atomic.Int64
	used.Store(95 * mib) // warm sandboxes, say
	var asked atomic.Int64
	c := newController(t, Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib, MaxQueue: 10, QueueWait: 10 * time.Second},
		Gauges{Memory: used.Load, Reclaim: func(need int64) {
			asked.Store(need)
			used.Add(-need) // the pool destroyed that much
		}})
	tk, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatalf("with warm sandboxes to release: %v", err)
	}
	defer tk.Release(0)
	if asked.Load() < 5*mib {
		t.Errorf("asked to reclaim %d bytes, want at least the 5 MB missing", asked.Load())
	}
	if rejected := c.Info().Rejections[execapi.RefusedMemory]; rejected != 0 {
		t.Errorf("%d refused for memory", rejected)
	}
}

// Under sustained CPU saturation new calls wait and are refused after the
// queue wait, for cpu; once pressure falls they start again.
func TestCPUSaturationRefusesAfterTheQueueWait(t *testing.T) {
	cpu := &fakeCPU{}
	cpu.set(1)
	c := newController(t, Settings{CPUThreshold: 0.8, MaxQueue: 10, QueueWait: 100 * time.Millisecond, Settle: time.Millisecond},
		Gauges{CPU: cpu})
	start := time.Now()
	_, err := c.Acquire(context.Background(), "A", time.Second)
	if r := refusalOf(t, err); r.Reason != execapi.RefusedCPU || r.RetryAfter < time.Second {
		t.Errorf("saturated: %+v", r)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("refused after %s, before the queue wait", time.Since(start))
	}
	if !containsAll(err.Error(), "CPU", "saturated") {
		t.Errorf("wording: %v", err)
	}
	if i := c.Info(); i.CPUPressure != 1 || i.CPUThreshold != 0.8 || i.Free != 0 || i.Rejections[execapi.RefusedCPU] != 1 {
		t.Errorf("info: %+v", i)
	}
	// Pressure falls while a call waits: it starts.
	got := make(chan outcome, 1)
	queueUp(t, c, context.Background(), "B", got)
	cpu.set(0.1)
	o := <-got
	if o.ticket == nil {
		t.Fatalf("after the pressure fell: %s", o.name)
	}
	o.ticket.Release(0)
}

// A burst is let in by steps the CPU gauge can see: MinStarting at first,
// one more for each call seen to leave the CPUs unsaturated; a step that
// saturates them stops the burst and takes the allowance back to
// MinStarting.
func TestStartingBoundStepsABurst(t *testing.T) {
	cpu := &fakeCPU{}
	c := newController(t, Settings{CPUThreshold: 0.8, MinStarting: 2, MaxStarting: 8, QueueWait: time.Minute, MaxQueue: 100, Settle: 5 * time.Millisecond},
		Gauges{CPU: cpu})
	got := make(chan outcome, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 20 {
		go func() {
			tk, err := c.Acquire(ctx, "A", time.Second)
			if err != nil {
				got <- outcome{name: err.Error()}
				return
			}
			got <- outcome{name: "A", ticket: tk}
		}()
	}
	take := func(n int) []*Ticket {
		t.Helper()
		var out []*Ticket
		for range n {
			o := <-got
			if o.ticket == nil {
				t.Fatalf("refused: %s", o.name)
			}
			out = append(out, o.ticket)
		}
		select {
		case o := <-got:
			t.Fatalf("more admitted than the step allows (%d): %s", n, o.name)
		case <-time.After(50 * time.Millisecond):
		}
		return out
	}
	start := func(ts []*Ticket) {
		for _, tk := range ts {
			tk.Started(nil)
		}
	}
	step := take(2) // MinStarting
	all := append([]*Ticket{}, step...)
	start(step)
	step = take(4) // the two settled light: allowance 4
	all = append(all, step...)
	start(step)
	step = take(8) // and 8, the maximum
	all = append(all, step...)
	// These saturate the CPUs: nothing more starts.
	cpu.set(1)
	start(step)
	// Settled, and the saturation seen by a look at the queue: Info settles
	// calls without looking at the queue, so Starting alone can reach 0
	// before the loop's next look takes the allowance back, and a loaded
	// machine may not run that look within any fixed time.
	waitFor(t, "settled and the allowance taken back", func() bool {
		if c.Info().Starting != 0 {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.allowance == c.s.MinStarting
	})
	select {
	case o := <-got:
		t.Fatalf("admitted while saturated: %s", o.name)
	case <-time.After(50 * time.Millisecond):
	}
	// Unsaturated again: MinStarting, not 8; the last 4 of 20 wait.
	cpu.set(0)
	all = append(all, take(2)...)
	for _, tk := range all {
		tk.Release(0)
	}
}

// meterAt is a sandbox's CPU count that grows by rate CPUs from now on.
func meterAt(rate float64) func() (time.Duration, bool) {
	start := time.Now()
	return func() (time.Duration, bool) { return time.Duration(rate * float64(time.Since(start))), true }
}

// A sandbox's own CPU count tells a call that computes from one that
// waits, where the machine's pressure cannot (creating sandboxes keeps it
// high whatever the calls then do; two CPU-bound calls on two CPUs leave
// it at 0): calls that wait grow the starting allowance, calls seen
// computing count against MaxCPUBound (with any still starting), and a
// call beyond it waits and is refused for cpu, with the pressure at 0.
func TestCPUBoundCallsAreBounded(t *testing.T) {
	cpu := &fakeCPU{}
	c := newController(t, Settings{CPUThreshold: 0.8, MinStarting: 2, MaxCPUBound: 2, QueueWait: 200 * time.Millisecond, MaxQueue: 10,
		Settle: 30 * time.Millisecond}, Gauges{CPU: cpu})
	acquire := func() *Ticket {
		t.Helper()
		tk, err := c.Acquire(context.Background(), "A", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	state := func() (allowance, bound int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.allowance, c.cpuBound
	}
	a, b := acquire(), acquire()
	a.Started(meterAt(0))
	b.Started(meterAt(0.05))
	waitFor(t, "settled", func() bool { return c.Info().Starting == 0 })
	if allowance, bound := state(); allowance != 4 || bound != 0 {
		t.Errorf("after two calls that wait: allowance %d, CPU-bound %d; want 4 and 0", allowance, bound)
	}
	x, y := acquire(), acquire()
	x.Started(meterAt(1))
	y.Started(meterAt(0.8))
	// Seen computing as they settle, and still on the next look: the
	// allowance falls back to MinStarting.
	waitFor(t, "the computing calls seen twice", func() bool { allowance, bound := state(); return allowance == 2 && bound == 2 })
	if _, err := c.Acquire(context.Background(), "B", time.Second); refusalOf(t, err).Reason != execapi.RefusedCPU {
		t.Errorf("beyond two CPU-bound calls: %v", err)
	}
	x.Release(time.Second)
	z := acquire() // room again
	for _, tk := range []*Ticket{a, b, y, z} {
		tk.Release(0)
	}
	if _, bound := state(); bound != 0 {
		t.Errorf("CPU-bound %d after every call ended", bound)
	}
}

// meterUntil is a sandbox's CPU count that grows by one CPU from now on
// for d, and then no more.
func meterUntil(d time.Duration) func() (time.Duration, bool) {
	start := time.Now()
	return func() (time.Duration, bool) { return min(time.Since(start), d), true }
}

// A call seen computing once, then waiting (an interpreter that waited
// its turn to start among many, then sleeps) is light, never CPU-bound; a
// CPU-bound call that stops computing is light again once seen idle twice;
// a light call that computes later is CPU-bound once seen doing so.
func TestCPUBoundIsWhatLasts(t *testing.T) {
	c := newController(t, Settings{CPUThreshold: 0.8, MinStarting: 2, Settle: 60 * time.Millisecond}, Gauges{CPU: &fakeCPU{}})
	starter, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	starter.Started(meterUntil(60 * time.Millisecond))
	waitFor(t, "the starter settled", func() bool { return c.Info().Starting == 0 })
	if i := c.Info(); i.CPUBound != 0 {
		t.Errorf("a call that computed for its first reading only counts as CPU-bound: %+v", i)
	}
	worker, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	worker.Started(meterUntil(300 * time.Millisecond))
	waitFor(t, "the worker CPU-bound", func() bool { return c.Info().CPUBound == 1 })
	waitFor(t, "the worker light again", func() bool { return c.Info().CPUBound == 0 })
	// A call that starts slowly (blocked on the disk, say) and then
	// computes is seen computing on a later look.
	late, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	late.Started(meterAfter(200 * time.Millisecond))
	waitFor(t, "the late starter settled light", func() bool { return c.Info().Starting == 0 })
	if i := c.Info(); i.CPUBound != 0 {
		t.Fatalf("settled CPU-bound before it computed: %+v", i)
	}
	waitFor(t, "the late starter seen computing", func() bool { return c.Info().CPUBound == 1 })
	for _, tk := range []*Ticket{starter, worker, late} {
		tk.Release(time.Second)
	}
}

// meterAfter is a sandbox's CPU count that stays at 0 for d, and then
// grows by one CPU.
func meterAfter(d time.Duration) func() (time.Duration, bool) {
	start := time.Now()
	return func() (time.Duration, bool) { return max(time.Since(start)-d, 0), true }
}

// Info's Free is what the controller would admit now: bounded by the
// capacity left and by the memory left in floors, 0 while the CPUs are
// saturated.
func TestInfoFree(t *testing.T) {
	var used atomic.Int64
	used.Store(40 * mib)
	cpu := &fakeCPU{}
	c := newController(t, Settings{Capacity: 10, MemoryBudget: 100 * mib, CallFloor: 10 * mib, CPUThreshold: 0.8}, Gauges{Memory: used.Load, CPU: cpu, CPUKind: "fake"})
	if i := c.Info(); i.Free != 6 || i.CPUGauge != "fake" || i.Capacity != 10 {
		t.Errorf("60 MB left in 10 MB floors: %+v", i)
	}
	used.Store(0)
	if i := c.Info(); i.Free != 10 {
		t.Errorf("bounded by capacity 10: free %d", i.Free)
	}
	cpu.set(0.9)
	if i := c.Info(); i.Free != 0 {
		t.Errorf("saturated: free %d", i.Free)
	}
	for _, r := range execapi.AdmissionRefusals {
		if _, ok := c.Info().Rejections[r]; !ok {
			t.Errorf("no count for %s", r)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
