package admission

import (
	"container/list"
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Gauges are what a Controller measures the machine with. A nil gauge
// turns its condition off.
type Gauges struct {
	// Memory is what every sandbox under the budget uses now, in bytes
	// (the cgroup parent's usage: warm sandboxes and other engines'
	// included).
	Memory func() int64
	// Reclaim asks for about need bytes to be freed by releasing idle
	// warm sandboxes, when a call cannot start for memory; the controller
	// looks again once it returns.
	Reclaim func(need int64)
	// CPU reports the CPUs' recent load.
	CPU CPUGauge
	// CPUKind names the CPU gauge for Info (GaugePSI, GaugeRunQueue).
	CPUKind string
}

// ErrClosed is what Acquire returns once the controller is closed.
var ErrClosed = errors.New("admission: closed")

// Controller admits calls. It is safe for concurrent use.
type Controller struct {
	s Settings
	g Gauges

	mu      sync.Mutex
	queue   fairQueue
	running map[*Ticket]struct{}
	// starting counts the running tickets in phaseStarting, cpuBound
	// those in phaseCPUBound (see observeLocked).
	starting int
	cpuBound int
	// allowance is how many may be starting at once now (see Settings).
	allowance int
	avg       time.Duration // running average of run lengths
	ncpu      int
	// blocked is what kept the queue from moving at the last look ("" when
	// nothing did): the reason a call that waited in vain is refused for.
	blocked    execapi.RefusalReason
	rejections map[execapi.RefusalReason]int64
	reclaiming bool
	closed     bool
	// What the sampler last read (see sample.go): decisions stand on
	// these, never on a read of their own.
	gauges readings
	// awaiting holds a floor for each call that left the starting ones
	// (settled, or released while starting) since the memory reading in
	// gauges began, at the time it left: its memory may not be in that
	// reading (a settled call's sandbox, or a session's, which outlives
	// its opening call), so the floor stays until a reading begun later.
	awaiting []time.Time
	// due orders the started calls by when each is next to be looked at;
	// started holds the calls started since the sampler's last look, for
	// it to schedule. wakeAt is when the sampler next looks of itself
	// (zero: not until kicked).
	due     schedule
	started []*Ticket
	wakeAt  time.Time
	// looked is closed at the end of each of the sampler's looks (and a
	// new one made): an Acquire that finds the readings old waits on it.
	looked chan struct{}

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Ticket is one call, waiting or admitted. Started and Release are safe to
// call more than once.
type Ticket struct {
	c       *Controller
	caller  string
	timeout time.Duration // the run's own limit, to bound estimates
	// resident is a call into a sandbox that already runs (AcquireRunning):
	// it starts nothing, so it reserves no memory floor and does not count
	// against the starting allowance.
	resident bool

	// Guarded by c.mu.
	ready    chan struct{} // closed when admitted
	granted  bool
	admitted time.Time
	started  time.Time // when its job began (zero before)
	phase    phase
	released bool
	// meter reads the sandbox's CPU demand (nil: it cannot); lastAt and
	// lastCPU are its last reading, seen the times in a row it found
	// the call computing (or, once CPU-bound, idle).
	meter   func() (time.Duration, bool)
	lastAt  time.Time
	lastCPU time.Duration
	seen    int
	// recheck is how long after its last reading a light call is read
	// again (about lightRecheck, spread so that calls that settled
	// together are not all read at once).
	recheck time.Duration
	gen     uint32        // of its live entry in the schedule
	elem    *list.Element // its place in the fair queue
}

// New makes a controller with settings s over gauges g. Close stops it.
func New(s Settings, g Gauges) *Controller {
	s = s.withDefaults()
	c := &Controller{
		s: s, g: g, queue: newFairQueue(), running: map[*Ticket]struct{}{}, allowance: s.MinStarting,
		avg: defaultRunEstimate, rejections: map[execapi.RefusalReason]int64{}, ncpu: runtime.NumCPU(),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), looked: make(chan struct{}),
	}
	// The first readings, so that the first calls have something to
	// stand on.
	c.refresh()
	go c.loop()
	return c
}

// Close stops the controller; calls still waiting stay so until their
// context ends. Every admitted ticket should have been released.
func (c *Controller) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.done
	// Calls waiting for a look that will not come go on at once (to
	// ErrClosed).
	c.mu.Lock()
	close(c.looked)
	c.mu.Unlock()
}

// Acquire admits a call of caller (execapi.CallerFrom of its context),
// whose run may take up to timeout, when there is room: at once, or after
// waiting in the queue. It returns the ticket to release when the call
// ends; a *execapi.Refusal when it waited in vain or could not wait; or
// ctx's error when the caller went away while it waited.
func (c *Controller) Acquire(ctx context.Context, caller string, timeout time.Duration) (*Ticket, error) {
	return c.acquire(ctx, &Ticket{c: c, caller: caller, timeout: timeout, ready: make(chan struct{})})
}

// acquire admits t: at once when nothing waits before it and there is
// room, else after waiting in the queue.
func (c *Controller) acquire(ctx context.Context, t *Ticket) (*Ticket, error) {
	now := time.Now()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	// A decision stands on the sampler's readings. Older than it keeps
	// them while calls flow, they mean it has been resting: the call asks
	// for a look and waits for it, a short while at most, then decides on
	// what there is. (Deciding on them as they were could refuse every
	// call for a CPU saturation long gone, with nothing to wake the
	// sampler; waiting in the queue instead could refuse calls as
	// queue_full with room to spare.)
	if c.staleLocked(now) {
		looked := c.looked
		c.kick()
		c.mu.Unlock()
		timer := time.NewTimer(staleWait)
		select {
		case <-looked:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		now = time.Now()
	}
	// A resident call passes calls that wait only for memory: it needs
	// none that is not in use already.
	if c.queue.len() == 0 || t.resident && c.blocked == execapi.RefusedMemory {
		reason := c.roomLocked(t)
		if reason == "" {
			c.grantLocked(t, now)
			c.mu.Unlock()
			return t, nil
		}
		if c.queue.len() == 0 {
			c.blockedLocked(reason)
		}
	}
	if c.s.QueueWait < 0 || (c.s.MaxQueue > 0 && c.queue.len() >= c.s.MaxQueue) {
		reason := execapi.RefusedQueueFull
		if c.s.QueueWait < 0 {
			reason = c.blockedReasonLocked() // there is no queue to be full
		}
		r := c.refuseLocked(reason)
		c.mu.Unlock()
		return nil, r
	}
	c.queue.push(t)
	c.kick()
	c.mu.Unlock()

	var expired <-chan time.Time
	if c.s.QueueWait > 0 {
		timer := time.NewTimer(c.s.QueueWait)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-t.ready:
		return t, nil
	case <-expired:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.granted {
		// Admitted as the wait ended: go ahead, unless the caller is gone.
		if ctx.Err() != nil {
			c.releaseLocked(t, 0)
			return nil, ctx.Err()
		}
		return t, nil
	}
	c.queue.remove(t)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, c.refuseLocked(c.blockedReasonLocked())
}

// Started says the ticket's sandbox is ready and its job begins: from a
// settle time on, the gauges see what the call uses, and it no longer
// counts as starting. meter, when not nil, reads what the sandbox's tasks
// have demanded of the CPUs (sandbox.CPUMeter): with it the controller
// tells a call that computes from one that waits.
func (t *Ticket) Started(meter func() (time.Duration, bool)) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.startedLocked(t, meter, time.Now())
}

// startedLocked is Started at now.
func (c *Controller) startedLocked(t *Ticket, meter func() (time.Duration, bool), now time.Time) {
	if t.released || !t.granted || !t.started.IsZero() {
		return
	}
	t.started = now
	t.meter = meter
	c.started = append(c.started, t)
	// The sampler will look at it from a third of the settle time on:
	// wake it unless its next look of itself comes after now and that
	// soon anyway, so that a steady flow of calls costs it nothing per
	// call. (A look already under way when wakeAt passed may end by
	// resting: its nextLookLocked sees c.started and looks again.)
	if c.wakeAt.IsZero() || !c.wakeAt.After(now) || c.wakeAt.Sub(now) > c.s.Settle/3 {
		c.kick()
	}
}

// Release ends the call's admission: its room goes to the calls waiting.
// ran is how long the run took (0 when it did not run), which feeds the
// estimates of later refusals.
func (t *Ticket) Release(ran time.Duration) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(t, ran)
}

func (c *Controller) releaseLocked(t *Ticket, ran time.Duration) {
	if t.released || !t.granted {
		return
	}
	t.released = true
	delete(c.running, t)
	switch t.phase {
	case phaseStarting:
		c.starting--
		if t.started.IsZero() {
			// Released before its job began: what it made may live on
			// (a session's sandbox, whose opening call this was), so its
			// floor stays until memory is read. A call that ran is
			// released once its sandbox is gone.
			c.awaitLocked(time.Now())
		}
		// A call that ended before it settled has given back what it
		// took: it grows the allowance as a light one does, so that
		// short calls back to back are not held to MinStarting.
		if ran > 0 {
			c.allowance = min(c.allowance+1, c.s.MaxStarting)
		}
	case phaseCPUBound:
		c.cpuBound--
	}
	if ran > 0 {
		c.avg = time.Duration(estimateSmoothing*float64(ran) + (1-estimateSmoothing)*float64(c.avg))
	}
	if c.queue.len() > 0 {
		// Room for a call waiting; with none waiting there is nothing
		// to look at again.
		c.kick()
	}
}

func (c *Controller) grantLocked(t *Ticket, now time.Time) {
	t.granted = true
	t.admitted = now
	c.running[t] = struct{}{}
	if t.resident {
		// Nothing to start: the CPU condition looks at it as at any
		// call seen waiting, and counts it once seen computing.
		t.phase = phaseLight
		t.recheck = spreadRecheck()
		return
	}
	c.starting++
}

// kick wakes the loop to look again.
func (c *Controller) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// roomLocked says why t cannot start now ("" when it can). A resident
// call is held to capacity and to the CPUs, not to memory or the starting
// allowance: its sandbox runs already.
func (c *Controller) roomLocked(t *Ticket) execapi.RefusalReason {
	if len(c.running) >= c.s.Capacity {
		return execapi.RefusedAtCapacity
	}
	if !t.resident && c.memoryOn() && c.reservedLocked()+c.s.CallFloor > c.s.MemoryBudget {
		return execapi.RefusedMemory
	}
	if c.cpuOn() {
		if !t.resident && c.starting >= c.allowance {
			return execapi.RefusedCPU
		}
		// Once some calls compute, any still starting may too.
		if c.cpuBound > 0 && c.cpuBound+c.starting >= c.s.MaxCPUBound {
			return execapi.RefusedCPU
		}
		// Saturated by others (other work on the host, other engines'
		// sandboxes, calls that compute unmeasured): the pressure is not
		// explained by calls of ours that start or compute, which the
		// bounds above already hold to what the CPUs take.
		if c.starting+c.cpuBound < c.ncpu && c.gauges.pressure >= c.s.CPUThreshold {
			c.allowance = c.s.MinStarting
			return execapi.RefusedCPU
		}
	}
	return ""
}

func (c *Controller) memoryOn() bool { return c.s.MemoryBudget > 0 && c.g.Memory != nil }
func (c *Controller) cpuOn() bool    { return c.s.CPUThreshold > 0 && c.g.CPU != nil }

// reservedLocked is the memory in use at the last reading plus a floor
// for each call starting or that left the starting ones since (its memory
// may not be in the reading).
func (c *Controller) reservedLocked() int64 {
	return c.gauges.memory + int64(c.starting+len(c.awaiting))*c.s.CallFloor
}

// blockedLocked records why the queue cannot move, and for memory asks
// for idle warm sandboxes to be released: before any call is refused for
// memory, the pool gives back what it holds.
func (c *Controller) blockedLocked(reason execapi.RefusalReason) {
	c.blocked = reason
	if reason != execapi.RefusedMemory || c.g.Reclaim == nil || c.reclaiming {
		return
	}
	need := c.reservedLocked() + c.s.CallFloor*int64(max(1, c.queue.len())) - c.s.MemoryBudget
	if need <= 0 {
		return
	}
	c.reclaiming = true
	go func() {
		c.g.Reclaim(need)
		c.mu.Lock()
		c.reclaiming = false
		c.gauges.forceMemory = true // what was freed shows at once
		c.kick()
		c.mu.Unlock()
	}()
}

// blockedReasonLocked is the reason the queue last could not move, at
// capacity when nothing was recorded.
func (c *Controller) blockedReasonLocked() execapi.RefusalReason {
	if c.blocked == "" {
		return execapi.RefusedAtCapacity
	}
	return c.blocked
}

// refuseLocked counts a refusal for reason and builds it, with when to
// retry as estimated from the runs in flight and the queue.
func (c *Controller) refuseLocked(reason execapi.RefusalReason) *execapi.Refusal {
	c.rejections[reason]++
	return &execapi.Refusal{Reason: reason, RetryAfter: c.estimateLocked(c.queue.len(), time.Now())}
}

// RoomFor reports whether bytes more of memory (a warm sandbox the pool
// would build) leave room for a call's floor beside everything reserved,
// with no call waiting: warm sandboxes never take room a call needs.
func (c *Controller) RoomFor(bytes int64) bool {
	// The pool builds one sandbox after another: each decision must see
	// the one before it, so read now (in the pool's goroutine, outside
	// the lock, never on a call's path).
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queue.len() > 0 {
		return false
	}
	if !c.memoryOn() {
		return true
	}
	return c.reservedLocked()+bytes+c.s.CallFloor <= c.s.MemoryBudget
}

// Running counts the calls admitted and not yet released.
func (c *Controller) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running)
}

// Settings are the settings in force (defaults filled in).
func (c *Controller) Settings() Settings { return c.s }
