package admission

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// These check that the readings are the sampler's: taken outside the
// controller's lock, never on a caller's path, and that what they cannot
// see yet is reserved.

// goid is the calling goroutine's id, from its stack's first line
// ("goroutine 18 [running]:").
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b, _, _ = bytes.Cut(b, []byte(" "))
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}

// watchedGauges are gauges that count their calls and record any made
// from the goroutine forbidden holds (0: none).
type watchedGauges struct {
	forbidden atomic.Int64
	calls     atomic.Int64
	offending atomic.Int64
}

func (w *watchedGauges) note() {
	w.calls.Add(1)
	if f := w.forbidden.Load(); f != 0 && f == goid() {
		w.offending.Add(1)
	}
}

func (w *watchedGauges) memory() int64 { w.note(); return 10 * mib }
func (w *watchedGauges) CPU() CPUReading {
	w.note()
	return CPUReading{}
}
func (w *watchedGauges) meter() func() (time.Duration, bool) {
	return func() (time.Duration, bool) { w.note(); return 0, true }
}

// Acquire and Release never read a gauge or a call's meter: with calls
// running and settled, with calls starting, and after the sampler has
// rested (old readings: the call waits for the sampler's look instead).
func TestAcquireReadsNothing(t *testing.T) {
	w := &watchedGauges{}
	c := newController(t, Settings{MemoryBudget: 1 << 30, CallFloor: mib, CPUThreshold: 0.9, MaxQueue: 100, QueueWait: 10 * time.Second,
		Settle: 3 * time.Millisecond}, Gauges{Memory: w.memory, CPU: w})
	w.forbidden.Store(goid()) // New read them here, as it may
	var held []*Ticket
	for range 20 {
		tk, err := c.AcquireRunning(context.Background(), "sleepers", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		tk.Started(w.meter())
		held = append(held, tk)
	}
	for round := range 3 {
		for range 200 {
			tk, err := c.Acquire(context.Background(), "A", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if round == 1 {
				tk.Started(w.meter())
			}
			tk.Release(0)
		}
		// Let the sampler rest: the next Acquire finds old readings.
		time.Sleep(3 * maxStale)
	}
	waitFor(t, "the sampler's readings", func() bool { return w.calls.Load() > 20 })
	if n := w.offending.Load(); n != 0 {
		t.Errorf("%d gauge or meter reads on the caller's goroutine", n)
	}
	for _, tk := range held {
		tk.Release(time.Second)
	}
}

// gatedMemory is a memory gauge the test answers: until done, each read
// announces itself on called and returns what the test sends on value.
type gatedMemory struct {
	armed  atomic.Bool
	called chan struct{}
	value  chan int64
	done   chan struct{}
}

func newGatedMemory() *gatedMemory {
	return &gatedMemory{called: make(chan struct{}), value: make(chan int64), done: make(chan struct{})}
}

func (g *gatedMemory) read() int64 {
	if !g.armed.Load() {
		return 0
	}
	select {
	case g.called <- struct{}{}:
	case <-g.done:
		return 0
	}
	select {
	case v := <-g.value:
		return v
	case <-g.done:
		return 0
	}
}

// state is the controller's counts.
func (c *Controller) state() (running, starting, unmeasured, cpuBound, allowance int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running), c.starting, len(c.awaiting), c.cpuBound, c.allowance
}

// burst acquires n calls at once that may not wait, and returns those
// admitted; the others must be refused for memory.
func burst(t *testing.T, c *Controller, n int) []*Ticket {
	t.Helper()
	var got []*Ticket
	for range n {
		tk, err := c.Acquire(context.Background(), "A", time.Minute)
		if err != nil {
			if r := refusalOf(t, err); r.Reason != execapi.RefusedMemory {
				t.Fatalf("refused for %s, want memory", r.Reason)
			}
			continue
		}
		got = append(got, tk)
	}
	return got
}

// However many calls arrive between two readings of memory, the floors
// hold them to the budget; a call's floor lasts after it settles until
// memory was read after that, even when a reading taken before says
// nothing is used.
func TestBurstBetweenReadingsHoldsToTheBudget(t *testing.T) {
	g := newGatedMemory()
	c := newController(t, Settings{MemoryBudget: 100 * mib, CallFloor: 10 * mib, QueueWait: -1, Settle: time.Millisecond},
		Gauges{Memory: g.read})
	g.armed.Store(true)
	defer close(g.done) // before the controller closes: its reads go on
	first := burst(t, c, 20)
	if len(first) != 10 {
		t.Fatalf("%d of a burst of 20 admitted with 0 of 100 MiB in use and 10 MiB floors, want 10", len(first))
	}
	// All started at one moment, in one hold of the lock, so that no read
	// of memory begins between two of them and they are due, and settle,
	// in one look.
	c.mu.Lock()
	now := time.Now()
	for _, tk := range first {
		c.startedLocked(tk, nil, now)
	}
	c.mu.Unlock()
	// While the sampler waits on a read of memory it changes nothing, so
	// what the calls are then is what they were when the read began:
	// answer "nothing in use" to the reads begun while some still
	// started, until one begins with all settled.
	for {
		select {
		case <-g.called:
		case <-time.After(10 * time.Second):
			t.Fatal("the sampler did not read memory")
		}
		if _, starting, _, _, _ := c.state(); starting == 0 {
			break
		}
		g.value <- 0
	}
	// Every reading so far began before some of them settled.
	if _, _, unmeasured, _, _ := c.state(); unmeasured != 10 {
		t.Fatalf("%d calls keep their floors after settling, want 10", unmeasured)
	}
	if more := burst(t, c, 5); len(more) != 0 {
		t.Fatalf("%d admitted on a reading taken before the calls settled", len(more))
	}
	// The reading begun after they settled: they use 50 MiB together.
	g.value <- 50 * mib
	waitFor(t, "the floors released", func() bool { _, _, unmeasured, _, _ := c.state(); return unmeasured == 0 })
	second := burst(t, c, 10)
	if len(second) != 5 {
		t.Errorf("%d of a burst of 10 admitted with 50 of 100 MiB in use, want 5", len(second))
	}
	for _, tk := range append(first, second...) {
		tk.Release(time.Second)
	}
}

// A call released while the sampler reads its meter is not touched by
// the reading: the counts stay as the release left them. The read is
// outside the lock: the release does not wait for it.
func TestReleasedCallsLateReadingIsIgnored(t *testing.T) {
	c := newController(t, Settings{CPUThreshold: 0.9, MinStarting: 2, Settle: 3 * time.Millisecond}, Gauges{CPU: &fakeCPU{}})
	var reads atomic.Int64
	reading, unblock := make(chan struct{}), make(chan struct{})
	meter := func() (time.Duration, bool) {
		if reads.Add(1) == 2 {
			// The second reading would settle the call light.
			close(reading)
			<-unblock
		}
		return 0, true
	}
	tk, err := c.Acquire(context.Background(), "A", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tk.Started(meter)
	select {
	case <-reading:
	case <-time.After(10 * time.Second):
		t.Fatal("the sampler did not read the meter")
	}
	released := make(chan struct{})
	go func() {
		tk.Release(0)
		close(released)
	}()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		close(unblock)
		t.Fatal("Release waited for the meter's reading")
	}
	close(unblock)
	// Another call goes through the sampler's next looks: the late
	// reading has been applied, or skipped, by the time it settles.
	other, err := c.Acquire(context.Background(), "B", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	other.Started(nil)
	waitFor(t, "the other call settled", func() bool { _, starting, _, _, _ := c.state(); return starting == 0 })
	other.Release(0)
	running, starting, _, cpuBound, allowance := c.state()
	if running != 0 || starting != 0 || cpuBound != 0 {
		t.Errorf("after both released: running %d, starting %d, CPU-bound %d", running, starting, cpuBound)
	}
	// The other call settled light (+1); the released one must not have.
	if allowance != 3 {
		t.Errorf("allowance %d, want 3 (MinStarting and the other call's settling)", allowance)
	}
}
