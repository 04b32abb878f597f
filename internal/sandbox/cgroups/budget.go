package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The parent directory holds every sandbox of every engine on the host
// that shares it, so its memory limit is the machine's budget for all of
// them: when they outgrow it together the kernel's OOM killer picks a
// victim inside the parent, never the engine or the host. Its usage is
// what an engine's admission measures.

// Enforces reports whether the manager applies controller's limits.
func (m *Manager) Enforces(controller string) bool { return m.enforced[controller] }

// SetParentMemoryLimit gives the parent directory a memory limit of bytes,
// swap included (0 lifts it), and remembers it, so that a parent another
// engine removed and this one re-creates gets it again. Engines sharing a
// parent share its limit: the last one set wins. Without the memory
// controller it does nothing.
func (m *Manager) SetParentMemoryLimit(bytes int64) error {
	if !m.enforced["memory"] {
		return nil
	}
	m.budget.Store(bytes)
	dir := m.dirs["memory"]
	if m.version == V2 {
		dir = m.dirs[""]
	}
	return setParentLimit(m.version, dir, bytes)
}

// setParentLimit writes bytes (0: no limit) as the memory limit of parent
// directory dir. A limit below what the sandboxes use now fails on cgroup
// v1 (EBUSY, when reclaim cannot get there); that error is returned as is.
func setParentLimit(v Version, dir string, bytes int64) error {
	g := &Group{version: v, dirs: map[string]string{"memory": dir, "": dir}, enforced: map[string]bool{"memory": true}}
	if bytes > 0 {
		return g.SetMemory(bytes)
	}
	if v == V2 {
		return write(dir, "memory.max", "max")
	}
	// -1 lifts a v1 limit; memsw first, as it must stay above the other
	// only while both are set.
	memsw := filepath.Join(dir, "memory.memsw.limit_in_bytes")
	if _, err := os.Stat(memsw); err == nil {
		if err := write(dir, "memory.memsw.limit_in_bytes", "-1"); err != nil {
			return err
		}
	}
	return write(dir, "memory.limit_in_bytes", "-1")
}

// reapplyBudget gives a parent directory this manager has just created the
// memory limit it holds (see SetParentMemoryLimit).
func (m *Manager) reapplyBudget(dir string) error {
	bytes := m.budget.Load()
	if bytes <= 0 || !m.enforced["memory"] {
		return nil
	}
	if m.version == V1 && dir != m.dirs["memory"] {
		return nil
	}
	if err := setParentLimit(m.version, dir, bytes); err != nil && !errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("memory budget of %s: %w", dir, err)
	}
	return nil
}

// ParentMemoryInUse is the memory every group below the parent uses now,
// the way the kernel weighs it against the parent's limit before it kills:
// usage minus the inactive file cache it would reclaim first (what
// container runtimes call the working set). The cache of image files that
// sandboxes read stays charged to the parent after they are gone; only the
// part in use counts. 0 when it cannot be read.
func (m *Manager) ParentMemoryInUse() int64 {
	if !m.enforced["memory"] {
		return 0
	}
	if m.version == V2 {
		dir := m.dirs[""]
		return workingSet(readInt(filepath.Join(dir, "memory.current")), filepath.Join(dir, "memory.stat"), "inactive_file")
	}
	dir := m.dirs["memory"]
	// total_ counts the whole subtree (v2's memory.stat always does).
	return workingSet(readInt(filepath.Join(dir, "memory.usage_in_bytes")), filepath.Join(dir, "memory.stat"), "total_inactive_file")
}

// workingSet is usage less the statistic key of the memory.stat file stat.
func workingSet(usage int64, stat, key string) int64 {
	if usage <= 0 {
		return 0
	}
	inactive := statValue(stat, key)
	if inactive > usage {
		return 0
	}
	return usage - inactive
}

// statValue reads one "key value" line of a memory.stat file (0 when absent).
func statValue(file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// readInt reads a file holding one integer ("max" and errors read as 0).
func readInt(file string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// CPUDemand is the time the group's tasks, those alive now, have spent
// running or runnable waiting for a CPU (the kernel's schedstat of each
// thread), and whether this host keeps that count. Unlike the CPU time a
// task got, which shrinks as more tasks share the CPUs, a task that
// computes demands the whole of any interval, however crowded: that tells
// a call that computes from one that waits. A wait still going on is
// counted too (see demandMemo), so a task starved of a CPU still demands.
func (g *Group) CPUDemand() (time.Duration, bool) {
	file := "tasks" // v1: every thread
	if g.version == V2 {
		file = "cgroup.threads"
	}
	var dir string
	for _, d := range g.dirs {
		dir = d
		break
	}
	tids := words(filepath.Join(dir, file))
	if tids == nil {
		return 0, false
	}
	total := g.demand.total(tids, time.Now(), readTask)
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		return 0, false
	}
	return total, true
}
