package hostside

import (
	"errors"
	"fmt"
	"syscall"

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

// GroupMemory is the memory a sandbox's cgroup uses now (0 without one).
func GroupMemory(g *cgroups.Group) int64 {
	if g == nil {
		return 0
	}
	return g.MemoryUsage()
}
