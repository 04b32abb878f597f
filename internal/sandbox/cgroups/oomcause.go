package cgroups

import (
	"os"
	"path/filepath"
)

// ownLimitMargin is how close to its own limit a v1 group's peak usage
// must have come for its OOM kill to be its own limit's: a charge fails
// there only when usage plus the pages asked for (a few, for the small
// allocations that can end in a kill) would cross the limit.
const ownLimitMargin = 1 << 20

// A process in a sandbox's group is killed for memory either at the
// group's own limit (the call's memory_mb) or at its parent's (the
// machine's budget for all sandboxes, see SetParentMemoryLimit). The
// group's oom_kill counter goes up either way, for a victim anywhere in
// it, so it cannot tell the two apart; what can, measured on both
// hierarchies (scratchrun's cgroups test and docs/design.md):
//
//   - cgroup v2: memory.events.local counts "oom" only when this group's
//     own memory.max was reached and reclaim failed; an OOM at the parent
//     counts in the parent's file alone.
//   - cgroup v1: no per-group OOM count survives (memory.failcnt stays 0
//     on current kernels), but memory.max_usage_in_bytes, the group's peak,
//     reaches its own limit when that limit killed, and stays below it
//     when the parent's did. ResetPeak clears the peak when a job starts,
//     so that what a warm sandbox did before its limit was lowered counts
//     for nothing.

// OwnLimitReached reports whether the group's own memory limit is what
// killed, when OOMKills says something was killed: false means the kill
// came from above (the parent's budget, or the whole machine).
func (g *Group) OwnLimitReached() bool {
	dir := g.dir("memory")
	if g.version == V2 {
		events := filepath.Join(dir, "memory.events.local")
		if _, err := os.Stat(events); err == nil {
			return eventCount(events, "oom") > 0
		}
		// Before Linux 5.2: the peak (5.19 and later) or, failing that,
		// the limit's own word.
		peak, limit := readInt(filepath.Join(dir, "memory.peak")), readInt(filepath.Join(dir, "memory.max"))
		return peak == 0 || limit == 0 || peak+ownLimitMargin >= limit
	}
	for _, pair := range [][2]string{
		{"memory.max_usage_in_bytes", "memory.limit_in_bytes"},
		{"memory.memsw.max_usage_in_bytes", "memory.memsw.limit_in_bytes"},
	} {
		peak, limit := readInt(filepath.Join(dir, pair[0])), readInt(filepath.Join(dir, pair[1]))
		if limit > 0 && peak+ownLimitMargin >= limit {
			return true
		}
	}
	return false
}

// ResetPeak starts the group's peak memory usage afresh (cgroup v1; on v2
// OwnLimitReached reads events, not the peak), when a job is about to run
// in a sandbox built earlier.
func (g *Group) ResetPeak() {
	if g.version != V1 || !g.enforced["memory"] {
		return
	}
	dir := g.dir("memory")
	_ = write(dir, "memory.max_usage_in_bytes", "0")
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.max_usage_in_bytes")); err == nil {
		_ = write(dir, "memory.memsw.max_usage_in_bytes", "0")
	}
}
