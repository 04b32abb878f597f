package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// sweepDeadRuns removes what earlier runs of this suite left when they
// were killed before their end (go test's timeout, a stopped session): a
// killed binary cannot run its own clean-up, so the next run does it.
// Only directories named as this suite's levels are (scratchrun-SUITE-PID-
// LEVEL) whose PID is no longer running are touched, so test binaries
// running beside this one keep theirs. It says on stderr what it removed.
func (e *Env) sweepDeadRuns() {
	prefix := "scratchrun-" + e.suite + "-"
	found := cgroups.HierarchyDirs(prefix + "*")
	state, _ := filepath.Glob("/run/" + prefix + "*")
	found = append(found, state...)
	swept := map[string]bool{}
	for _, dir := range found {
		name := filepath.Base(dir)
		pid, ok := runPID(name, prefix)
		if !ok || swept[name] || pid == os.Getpid() || processRunning(pid) {
			continue
		}
		swept[name] = true
		if err := sweepRun(name); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: what a killed run left (%s): %v\n", name, err)
		} else {
			fmt.Fprintf(os.Stderr, "testenv: removed what a killed run left (%s)\n", name)
		}
	}
}

// runPID is the PID in a level's name, prefix followed by "PID-LEVEL".
func runPID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	return pid, ok && err == nil && pid > 0
}

func processRunning(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// sweepRun unmounts what is mounted below the level's state directory and
// removes it, kills what its sandboxes' groups still hold and removes them
// and the level's cgroup parent, on every hierarchy.
func sweepRun(name string) error {
	state := filepath.Join("/run", name)
	mounts := mountsBelow(state)
	sort.Sort(sort.Reverse(sort.StringSlice(mounts))) // the deepest first
	for _, mp := range mounts {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	if err := os.RemoveAll(state); err != nil {
		return err
	}
	m, err := cgroups.New(name)
	if err != nil {
		return err
	}
	if _, err := m.Sweep(nil); err != nil {
		return err
	}
	if err := m.RemoveParent(); err != nil {
		return err
	}
	return removeCgroupDirs(name)
}

// mountsBelow lists the mount points at or below dir.
func mountsBelow(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}
