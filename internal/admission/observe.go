package admission

import "time"

// phase is where an admitted call stands for the CPU condition.
type phase int

const (
	// phaseStarting: admitted, and not yet seen by the gauges: its
	// sandbox is being made ready, or has not run long enough to say
	// what it does. It counts against the starting allowance.
	phaseStarting phase = iota
	// phaseLight: seen waiting more than computing (or, without a CPU
	// count, seen without saturating the CPUs).
	phaseLight
	// phaseCPUBound: seen computing; it counts against MaxCPUBound.
	phaseCPUBound
)

// lightRecheck is how often a light call is looked at again: seldom, as a
// hundred of them may wait at once, each a few files to read.
const lightRecheck = time.Second

// cpuBoundRate is the share of a window a call's sandbox must demand a CPU
// (its tasks running or waiting to run) to count as computing: a busy loop
// demands all of it however crowded the CPUs are; a program that waits,
// once started, next to none.
const cpuBoundRate = 0.5

// observeLocked moves t on by what its sandbox has demanded of the CPUs,
// measured over windows of two thirds of the settle time from a third of
// it after the job began. A call seen waiting is light: it leaves the
// starting ones and grows the allowance by one, so that a burst of calls
// that wait is let in by steps that double. One seen computing twice in a
// row is CPU-bound: it counts against MaxCPUBound and takes the allowance
// back to MinStarting (once could be an interpreter that waited its turn
// to start among many and then sleeps; it stays starting meanwhile). A
// CPU-bound call seen idle twice in a row is light after all (once could
// be the kernel's accounting, which counts a task's wait when it gets the
// CPU); a light one seen computing later, over a second or more, is
// CPU-bound then. The sandbox's own count tells calls apart where the
// machine's pressure cannot: creating sandboxes keeps the CPUs saturated
// whatever the calls then do. Without a count, a call settles after
// Settle, light when the CPUs are not saturated.
func (c *Controller) observeLocked(t *Ticket, now time.Time) {
	if t.started.IsZero() {
		return
	}
	if t.phase == phaseLight {
		// Seen again now and then: a call that started slowly (its
		// interpreter blocked on the disk) or that computes only after a
		// while is CPU-bound once seen computing.
		if c.cpuOn() && t.meter != nil && now.Sub(t.lastAt) >= lightRecheck {
			if computing, ok := c.sampleLocked(t, now); ok && computing {
				t.phase = phaseCPUBound
				c.cpuBound++
				c.allowance = c.s.MinStarting
			}
		}
		return
	}
	if !c.cpuOn() || t.meter == nil {
		if t.phase == phaseStarting && now.Sub(t.started) >= c.s.Settle {
			light := !c.cpuOn() || c.g.CPU.CPU().Pressure < c.s.CPUThreshold
			c.settleLocked(t, phaseLight, light)
		}
		return
	}
	if t.lastAt.IsZero() {
		if now.Sub(t.started) >= c.s.Settle/3 {
			c.sampleLocked(t, now)
		}
		return
	}
	if now.Sub(t.lastAt) < 2*c.s.Settle/3 {
		return
	}
	computing, ok := c.sampleLocked(t, now)
	switch {
	case !ok:
		t.meter = nil // no count after all: settle by pressure
	case t.phase == phaseStarting && !computing:
		c.settleLocked(t, phaseLight, true)
	case t.phase == phaseStarting:
		if t.seen++; t.seen >= 2 {
			t.seen = 0
			c.settleLocked(t, phaseCPUBound, false)
		}
	case computing: // CPU-bound, and still computing
		t.seen = 0
		c.allowance = c.s.MinStarting
	default: // CPU-bound, idle
		if t.seen++; t.seen >= 2 {
			t.phase = phaseLight
			c.cpuBound--
		}
	}
}

// sampleLocked reads t's CPU demand and reports whether, since the last
// reading, it demanded a CPU for cpuBoundRate of the time or more.
func (c *Controller) sampleLocked(t *Ticket, now time.Time) (computing, ok bool) {
	cpu, ok := t.meter()
	if !ok {
		return false, false
	}
	first := t.lastAt.IsZero()
	dt, demanded := now.Sub(t.lastAt), cpu-t.lastCPU
	t.lastAt, t.lastCPU = now, cpu
	return !first && float64(demanded) >= cpuBoundRate*float64(dt), true
}

// settleLocked moves a starting call to phase p; light grows the starting
// allowance by one.
func (c *Controller) settleLocked(t *Ticket, p phase, light bool) {
	t.phase = p
	c.starting--
	switch {
	case p == phaseCPUBound:
		c.cpuBound++
		c.allowance = c.s.MinStarting
	case light:
		c.allowance = min(c.allowance+1, c.s.MaxStarting)
	}
}

// observeAllLocked looks at every running call (observeLocked): before
// each decision, so that it stands on what the calls do now.
func (c *Controller) observeAllLocked(now time.Time) {
	for t := range c.running {
		c.observeLocked(t, now)
	}
}
