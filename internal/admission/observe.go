package admission

import (
	"math/rand/v2"
	"time"
)

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

// observeLocked moves t on by d, a reading of its sandbox's CPU demand
// the sampler took when t was due (dueLocked; d.read false: t has no
// count, and was due to settle by time alone), measured over windows of
// two thirds of the settle time from a third of it after the job began.
// A call seen waiting is light: it leaves the
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
// Settle, light when the CPUs are not saturated. A meter that cannot
// read is not read again: the call goes on without a count.
func (c *Controller) observeLocked(t *Ticket, d demand, now time.Time) {
	if !d.read {
		if t.phase == phaseStarting {
			light := !c.cpuOn() || c.gauges.pressure < c.s.CPUThreshold
			c.settleLocked(t, phaseLight, light, now)
		}
		return
	}
	if !d.ok {
		t.meter = nil // no count after all: settle by pressure
		return
	}
	first := t.lastAt.IsZero()
	computing := c.sampleLocked(t, d)
	if t.phase == phaseLight {
		// Seen again now and then: a call that started slowly (its
		// interpreter blocked on the disk) or that computes only after a
		// while is CPU-bound once seen computing.
		if computing {
			t.phase = phaseCPUBound
			c.cpuBound++
			c.allowance = c.s.MinStarting
		}
		t.recheck = spreadRecheck()
		return
	}
	if first {
		return // the start of the first window
	}
	switch {
	case t.phase == phaseStarting && !computing:
		c.settleLocked(t, phaseLight, true, now)
	case t.phase == phaseStarting:
		if t.seen++; t.seen >= 2 {
			t.seen = 0
			c.settleLocked(t, phaseCPUBound, false, now)
		}
	case computing: // CPU-bound, and still computing
		t.seen = 0
		c.allowance = c.s.MinStarting
	default: // CPU-bound, idle
		if t.seen++; t.seen >= 2 {
			t.phase = phaseLight
			t.recheck = spreadRecheck()
			c.cpuBound--
		}
	}
}

// dueLocked is when t is next to be looked at (ok false: not until
// something changes), and whether its meter is to be read then: from a
// third of the settle time after its start, every two thirds of it while
// it starts or computes, every recheck while it is light; without a
// count, once, to settle by time alone.
func (c *Controller) dueLocked(t *Ticket) (at time.Time, read, ok bool) {
	if t.started.IsZero() {
		return time.Time{}, false, false
	}
	counted := c.cpuOn() && t.meter != nil
	switch {
	case t.phase == phaseLight:
		if !counted {
			return time.Time{}, false, false
		}
		return t.lastAt.Add(t.recheck), true, true
	case !counted:
		if t.phase != phaseStarting {
			return time.Time{}, false, false
		}
		return t.started.Add(c.s.Settle), false, true
	case t.lastAt.IsZero():
		return t.started.Add(c.s.Settle / 3), true, true
	default:
		return t.lastAt.Add(2 * c.s.Settle / 3), true, true
	}
}

// sampleLocked records d as t's last reading and reports whether, since
// the one before, it demanded a CPU for cpuBoundRate of the time or more
// (false for the first).
func (c *Controller) sampleLocked(t *Ticket, d demand) bool {
	first := t.lastAt.IsZero()
	dt, demanded := d.at.Sub(t.lastAt), d.cpu-t.lastCPU
	t.lastAt, t.lastCPU = d.at, d.cpu
	return !first && float64(demanded) >= cpuBoundRate*float64(dt)
}

// settleLocked moves a starting call to phase p; light grows the starting
// allowance by one. Its floor stays reserved until the memory gauge has
// been read after now (awaitLocked).
func (c *Controller) settleLocked(t *Ticket, p phase, light bool, now time.Time) {
	t.phase = p
	c.starting--
	c.awaitLocked(now)
	switch {
	case p == phaseCPUBound:
		c.cpuBound++
		c.allowance = c.s.MinStarting
	case light:
		c.allowance = min(c.allowance+1, c.s.MaxStarting)
		t.recheck = spreadRecheck()
	}
}

// spreadRecheck is a light call's recheck: lightRecheck, give or take a
// quarter, at random, so that calls that settled together are read apart.
func spreadRecheck() time.Duration {
	return lightRecheck*3/4 + rand.N(lightRecheck/2)
}
