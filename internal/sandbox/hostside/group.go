package hostside

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// PrepareGroup readies a sandbox's cgroup for its job: one built at
// background CPU weight gets the normal weight back, and the job's memory
// limit (bytes, when above 0) is applied. A limit below what the sandbox
// already uses becomes sandbox.ErrLimitBelowUsage, so the engine can fall
// back to a fresh sandbox.
func PrepareGroup(g *cgroups.Group, background bool, bytes int64) error {
	if g == nil {
		return nil
	}
	// From here on, a peak is the job's (see cgroups.Group.OwnLimitReached).
	defer g.ResetPeak()
	if background {
		if err := g.SetBackground(false); err != nil {
			return err
		}
	}
	if bytes <= 0 {
		return nil
	}
	err := g.SetMemory(bytes)
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("%w: %v", sandbox.ErrLimitBelowUsage, err)
	}
	return err
}

// DestroyGroup kills whatever is left in a sandbox's cgroup and removes it,
// saying what could not be (nil group: nothing to do).
func DestroyGroup(g *cgroups.Group) error {
	if g == nil {
		return nil
	}
	var errs []error
	if !g.KillAll() {
		errs = append(errs, fmt.Errorf("processes still in cgroup after SIGKILL: %v", g.Procs()))
	}
	if err := g.Destroy(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MeasureOOM sets what g's memory counters say about kills: at the
// group's own limit (out.OOMKilled) or, within it, because the sandboxes'
// parent ran out (out.MachineOOMKilled).
func MeasureOOM(g *cgroups.Group, out *sandbox.Outcome) {
	if g == nil || g.OOMKills() == 0 {
		return
	}
	if g.OwnLimitReached() {
		out.OOMKilled = true
	} else {
		out.MachineOOMKilled = true
	}
}

// GroupMemory is the memory a sandbox's cgroup uses now (0 without one).
func GroupMemory(g *cgroups.Group) int64 {
	if g == nil {
		return 0
	}
	return g.MemoryUsage()
}

// SetMemoryBudget implements sandbox.MemoryBudget's SetMemoryBudget for a
// backend whose sandboxes live under m (nil: no cgroups at all).
func SetMemoryBudget(m *cgroups.Manager, bytes int64) (bool, error) {
	if m == nil || !m.Enforces("memory") {
		return false, nil
	}
	return true, m.SetParentMemoryLimit(bytes)
}

// MemoryInUse implements sandbox.MemoryBudget's MemoryInUse for a backend
// whose sandboxes live under m.
func MemoryInUse(m *cgroups.Manager) int64 {
	if m == nil {
		return 0
	}
	return m.ParentMemoryInUse()
}

// GroupCPUDemand is what a sandbox's cgroup's tasks demanded of the CPUs
// (see sandbox.CPUMeter; false without a group or a count).
func GroupCPUDemand(g *cgroups.Group) (time.Duration, bool) {
	if g == nil {
		return 0, false
	}
	return g.CPUDemand()
}
