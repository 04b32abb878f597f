package admission

import (
	"runtime"
	"time"
)

// Defaults of Settings (see Defaults).
const (
	// HardCapacity caps the calls running at once when the operator gave
	// no capacity: a safety bound on the engine's own descriptors,
	// processes and goroutines (a sandbox holds about six descriptors and
	// two processes), far beyond what the gauges let a machine run.
	HardCapacity = 1024
	// DefaultQueueWait is how long a call waits for room before it is
	// refused.
	DefaultQueueWait = 2 * time.Second
	// DefaultMaxQueue bounds the calls waiting: each holds its request
	// (up to the body limit) in memory while it waits.
	DefaultMaxQueue = 256
	// DefaultCallFloor is the memory reserved for a call whose sandbox the
	// memory gauge cannot see yet: about what a Python sandbox uses once
	// its interpreter runs (a light warm one 3.5 MiB idle, more once the
	// job's code is loaded), not its memory_mb, which most calls never
	// come near.
	DefaultCallFloor = 32 << 20
	// DefaultCPUThreshold is the CPU pressure (the share of a short window
	// in which some runnable task waited for a CPU) at which no more calls
	// start while the calls of this engine's own that start or compute
	// are fewer than the CPUs: the CPUs are then saturated by something
	// else (other work on the host, another engine, calls that compute
	// unmeasured). The kernel's figure is an average over the CPUs, and
	// the scheduler often leaves them unevenly loaded: four busy loops on
	// two CPUs read 0.55 as often as 1 here, so pressure alone cannot
	// count this engine's own CPU-bound calls (MaxCPUBound does), and a
	// lower threshold mostly turned calls away for other programs' bursts.
	DefaultCPUThreshold = 0.9
	// DefaultMaxStarting bounds the calls starting at once however light
	// the calls before them turned out.
	DefaultMaxStarting = 64
	// DefaultSettle is how long after its job begins a call is first
	// judged (then every two thirds of it): long enough for a light
	// interpreter to have started, and for the CPU gauge's window
	// (DefaultWindow) to lie wholly after the start.
	DefaultSettle = 150 * time.Millisecond
	// tick is how often, while calls wait or start, the controller looks
	// again at the gauges.
	tick = 20 * time.Millisecond
)

// Settings are the operator's admission settings. The zero value admits
// by count alone (HardCapacity) and lets a call wait as long as its
// context allows, as an engine without resource conditions (a test's, a
// one-shot CLI call's) wants; Defaults holds the servers' defaults.
type Settings struct {
	// Capacity caps the calls running at once, whatever the gauges say
	// (an operator's --capacity); 0 means HardCapacity.
	Capacity int
	// MaxQueue bounds the calls waiting for room (0: no bound); a call
	// beyond it is refused at once (queue_full).
	MaxQueue int
	// QueueWait bounds how long a call waits for room before it is
	// refused; 0 waits as long as the call's context allows, negative not
	// at all.
	QueueWait time.Duration
	// MemoryBudget is the memory all sandboxes may use together, in
	// bytes (0: no memory condition). The engine gives the sandboxes'
	// cgroup parent this limit.
	MemoryBudget int64
	// CallFloor is the memory reserved for each admitted call whose
	// sandbox is not measured yet, and for the call being admitted (0
	// with a budget: DefaultCallFloor).
	CallFloor int64
	// CPUThreshold is the CPU pressure (0 to 1) at which calls stop
	// starting (0: no CPU condition).
	CPUThreshold float64
	// MinStarting and MaxStarting bound how many admitted calls may be
	// starting (admitted, not yet seen by the gauges) at once: a burst is
	// let in by steps the gauges can see, from MinStarting (0: one per
	// CPU) growing by one for each call that turned out light or ended,
	// back to MinStarting when calls compute or the CPUs are saturated,
	// up to MaxStarting (0: DefaultMaxStarting). Only with a CPU
	// condition.
	MinStarting, MaxStarting int
	// MaxCPUBound bounds the calls seen computing (their sandboxes demand
	// a CPU), with those still starting once there is one (0: two per
	// CPU): CPU-bound calls beyond that would each slow the others past
	// twice their time alone. Only with a CPU condition.
	MaxCPUBound int
	// Settle is how long after its job began a call is first judged
	// computing or waiting (0: DefaultSettle).
	Settle time.Duration
}

// Defaults are the servers' settings (scratchrun serve and mcp) on a
// machine with totalMemory bytes (MachineMemory): a memory budget of DefaultBudget, the
// CPU threshold, a bounded queue and queue wait, and no capacity beyond
// HardCapacity.
func Defaults(totalMemory int64) Settings {
	return Settings{
		MaxQueue:     DefaultMaxQueue,
		QueueWait:    DefaultQueueWait,
		MemoryBudget: DefaultBudget(totalMemory),
		CallFloor:    DefaultCallFloor,
		CPUThreshold: DefaultCPUThreshold,
	}
}

// DefaultBudget is the memory sandboxes get on a machine with total bytes:
// all of it but a reserve for the host and the engine, the larger of
// 1 GiB and a tenth (0 when total is unknown).
func DefaultBudget(total int64) int64 {
	if total <= 0 {
		return 0
	}
	reserve := max(int64(1)<<30, total/10)
	if total-reserve < total/2 {
		// A small machine: keep half for the host.
		return total / 2
	}
	return total - reserve
}

// withDefaults fills the zero fields that have defaults.
func (s Settings) withDefaults() Settings {
	if s.Capacity <= 0 {
		s.Capacity = HardCapacity
	}
	if s.MemoryBudget > 0 && s.CallFloor <= 0 {
		s.CallFloor = DefaultCallFloor
	}
	if s.MinStarting <= 0 {
		s.MinStarting = runtime.NumCPU()
	}
	if s.MaxStarting <= 0 {
		s.MaxStarting = DefaultMaxStarting
	}
	if s.MaxStarting < s.MinStarting {
		s.MaxStarting = s.MinStarting
	}
	if s.MaxCPUBound <= 0 {
		s.MaxCPUBound = 2 * runtime.NumCPU()
	}
	if s.Settle <= 0 {
		s.Settle = DefaultSettle
	}
	return s
}
