package admission

import (
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The controller's readings are taken by one goroutine, the sampler
// (loop), outside the controller's lock: under it, it notes what is due
// (the gauges, and the calls whose sandboxes are to be read), releases
// it, reads (files under /sys/fs/cgroup and /proc, for hundreds of calls
// at times), and takes it again to apply what it read, skipping the calls
// released meanwhile, and to admit what now fits. Acquire, Release and
// the decisions stand on the last readings alone: a call costs the same
// with none running as with hundreds, and no call waits on a read.
//
// A reading of memory may be up to a sampling period old. What it cannot
// see yet is reserved: a floor for each call starting, kept after the call
// settles (or is released before its job began: a session's sandbox
// outlives the call that opened it) until memory has been read after, so that
// a burst admitted between two readings holds to the budget; and an
// Acquire that finds the readings older than a period (the sampler rests
// when nothing is to be looked at) asks for the sampler's next look and
// waits for it, a short while at most.

// readings are the gauges' last values.
type readings struct {
	memory   int64
	memoryAt time.Time // when the read began (zero: never read)
	pressure float64
	cpuAt    time.Time
	// forceMemory asks the next look to read memory however recent the
	// last reading (idle sandboxes were released).
	forceMemory bool
}

// Sampling periods.
const (
	// memoryPeriod is how often at most memory is read, however often the
	// sampler is woken (every release while calls wait).
	memoryPeriod = tick / 2
	// maxStale is how old readings may be for a call to be decided on
	// them at once: the sampler reads every tick while calls flow, so
	// older readings mean it has been resting.
	maxStale = 2 * tick
	// staleWait bounds an Acquire's wait for the look it asked for: a look
	// with nothing running is two reads, so only a machine starving the
	// sampler of CPU makes the call decide on the old readings (once: the
	// look comes for the calls after it).
	staleWait = time.Second
	// lightSlack is how much early a light call may be read, so that
	// calls due about together are read in one look.
	lightSlack = tick / 2
)

// demand is one reading of a call's CPU meter (read false: the call was
// due to settle without one).
type demand struct {
	read, ok bool
	cpu      time.Duration
	at       time.Time
}

// look is one of the sampler's passes: what it reads, for which calls.
type look struct {
	memory, cpu bool
	tickets     []*Ticket
	meters      []func() (time.Duration, bool) // nil: not read
	// got is what was read, in the order of tickets.
	got      []demand
	at       time.Time
	memValue int64
	pressure float64
}

// staleLocked says whether the readings are too old to decide on.
func (c *Controller) staleLocked(now time.Time) bool {
	return c.memoryOn() && now.Sub(c.gauges.memoryAt) > maxStale ||
		c.cpuOn() && now.Sub(c.gauges.cpuAt) > maxStale
}

// refresh reads the gauges outside the lock and applies them. For what is
// not on a call's path (New, Info, RoomFor).
func (c *Controller) refresh() {
	c.mu.Lock()
	l := look{memory: c.memoryOn(), cpu: c.cpuOn()}
	c.mu.Unlock()
	l.readGauges(c.g)
	c.mu.Lock()
	c.applyGaugesLocked(&l)
	c.mu.Unlock()
}

// readGauges reads the gauges l asks for.
func (l *look) readGauges(g Gauges) {
	l.at = time.Now()
	if l.memory {
		l.memValue = g.Memory()
	}
	if l.cpu {
		l.pressure = g.CPU.CPU().Pressure
	}
}

// applyGaugesLocked takes in l's gauge readings, unless newer ones came
// in meanwhile (Info's, say, beside the sampler's).
func (c *Controller) applyGaugesLocked(l *look) {
	if l.memory && l.at.After(c.gauges.memoryAt) {
		c.applyMemoryLocked(l.memValue, l.at)
	}
	if l.cpu && l.at.After(c.gauges.cpuAt) {
		c.gauges.pressure, c.gauges.cpuAt = l.pressure, l.at
	}
}

// applyMemoryLocked takes in a reading of memory begun at at: what left
// the starting calls before at is in it, so those floors go.
func (c *Controller) applyMemoryLocked(v int64, at time.Time) {
	c.gauges.memory, c.gauges.memoryAt, c.gauges.forceMemory = v, at, false
	n := 0
	for n < len(c.awaiting) && c.awaiting[n].Before(at) {
		n++
	}
	c.awaiting = c.awaiting[n:]
	if len(c.awaiting) == 0 {
		c.awaiting = nil // let the array go
	}
}

// awaitLocked keeps the floor of a call that stops starting at now (under
// the lock, so that the times are in order) until memory is read after.
// Only non-resident calls start, so only they have floors.
func (c *Controller) awaitLocked(now time.Time) {
	if c.memoryOn() {
		c.awaiting = append(c.awaiting, now)
		// The sampler may be resting (nothing waits or starts): a floor
		// left for a reading must have one coming.
		c.kick()
	}
}

// planLocked notes what the look at now reads: memory when its reading
// is a memoryPeriod old (or forced), the CPU gauge, and the calls due
// (the schedule's), after entering the calls started since the last look.
func (c *Controller) planLocked(now time.Time) *look {
	l := &look{
		memory: c.memoryOn() && (c.gauges.forceMemory || now.Sub(c.gauges.memoryAt) >= memoryPeriod),
		cpu:    c.cpuOn(),
	}
	for _, t := range c.started {
		c.scheduleLocked(t)
	}
	clear(c.started)
	c.started = c.started[:0]
	for _, t := range c.takeDueLocked(now) {
		_, read, _ := c.dueLocked(t)
		var m func() (time.Duration, bool)
		if read {
			m = t.meter
		}
		l.tickets = append(l.tickets, t)
		l.meters = append(l.meters, m)
	}
	return l
}

// read takes l's readings; outside the lock.
func (l *look) read(g Gauges) {
	l.readGauges(g)
	l.got = make([]demand, len(l.meters))
	for i, m := range l.meters {
		if m == nil {
			continue
		}
		at := time.Now()
		cpu, ok := m()
		l.got[i] = demand{read: true, ok: ok, cpu: cpu, at: at}
	}
}

// applyLocked takes in l's readings: the gauges, then each call's, but
// for the calls released since.
func (c *Controller) applyLocked(l *look, now time.Time) {
	c.applyGaugesLocked(l)
	for i, t := range l.tickets {
		if t.released {
			continue
		}
		c.observeLocked(t, l.got[i], now)
		c.scheduleLocked(t)
	}
}

// loop is the sampler: it looks when kicked (a call started, room freed
// for calls waiting, a call found the readings old) and when something
// is due, and rests while nothing is to be looked at.
func (c *Controller) loop() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		case <-timer.C:
		}
		now := time.Now()
		c.mu.Lock()
		l := c.planLocked(now)
		c.mu.Unlock()
		l.read(c.g)
		c.mu.Lock()
		now = time.Now()
		c.applyLocked(l, now)
		c.stepLocked(now)
		next := c.nextLookLocked(now)
		changed := !next.Equal(c.wakeAt)
		c.wakeAt = next
		close(c.looked)
		c.looked = make(chan struct{})
		c.mu.Unlock()
		if changed {
			timer.Stop()
			if !next.IsZero() {
				timer.Reset(next.Sub(now))
			}
		}
	}
}

// nextLookLocked is when the sampler next looks of itself (zero: not
// until kicked): every tick while calls wait, start or compute, or floors
// wait for a reading of memory, since the gauges change by themselves;
// and when the next call is due.
func (c *Controller) nextLookLocked(now time.Time) time.Time {
	var next time.Time
	if c.queue.len() > 0 || c.starting > 0 || c.cpuBound > 0 || len(c.awaiting) > 0 {
		next = now.Add(tick)
	}
	if len(c.started) > 0 {
		next = now // started during this look: to be scheduled at once
	}
	if at, ok := c.nextDueLocked(); ok && (next.IsZero() || at.Before(next)) {
		next = at
	}
	if !next.IsZero() && next.Sub(now) < time.Millisecond {
		next = now.Add(time.Millisecond)
	}
	return next
}

// stepLocked admits what fits, from the readings it has.
func (c *Controller) stepLocked(now time.Time) {
	for c.queue.len() > 0 {
		reason := c.roomLocked(c.queue.peek())
		if reason != "" {
			c.blockedLocked(reason)
			if reason == execapi.RefusedMemory {
				c.grantResidentLocked(now)
			}
			break
		}
		t := c.queue.pop()
		c.grantLocked(t, now)
		close(t.ready)
	}
	if c.queue.len() == 0 {
		c.blocked = ""
	}
}
