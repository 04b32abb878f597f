package goinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// guestCgroupDir is where the agent mounts the guest's cgroup2, in the
// initramfs: once init has moved into the sandbox's root it is out of
// every path user code can name, and init keeps a descriptor of the
// sandbox's group.
const guestCgroupDir = "/sys/fs/cgroup"

// guestGroup is the guest cgroup user code's reaper, and so every process
// of the program, runs in: its memory limit is the request's memory_mb,
// and the guest kernel's own out-of-memory killer acts at it, as the
// host's does for the other backends.
type guestGroup struct {
	dir *os.File
	// Counts before the job, so that the report is the job's own.
	oomBefore, forkBefore uint64
}

// newGuestGroup creates the group with the limits of m.
func newGuestGroup(m initproto.VMMessage) (*guestGroup, error) {
	if err := os.MkdirAll(guestCgroupDir, 0o755); err != nil {
		return nil, err
	}
	if err := mount("cgroup2", guestCgroupDir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, err
	}
	if err := os.WriteFile(guestCgroupDir+"/cgroup.subtree_control", []byte("+memory +pids +cpu"), 0); err != nil {
		return nil, fmt.Errorf("enable the guest's cgroup controllers: %w", err)
	}
	path := guestCgroupDir + "/sandbox"
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	g := &guestGroup{dir: dir}
	if err := g.write("memory.swap.max", "0"); err != nil {
		return nil, err
	}
	return g, g.setLimits(m)
}

func (g *guestGroup) write(file, value string) error {
	fd, err := unix.Openat(int(g.dir.Fd()), file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("guest cgroup %s: %w", file, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(value)); err != nil {
		return fmt.Errorf("guest cgroup %s = %s: %w", file, value, err)
	}
	return nil
}

func (g *guestGroup) read(file string) string {
	fd, err := unix.Openat(int(g.dir.Fd()), file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	f := os.NewFile(uintptr(fd), file)
	defer f.Close()
	buf := make([]byte, 4096)
	n, _ := f.Read(buf)
	return string(buf[:n])
}

// setLimits applies m's limits (0: leave as they are).
func (g *guestGroup) setLimits(m initproto.VMMessage) error {
	if m.MemoryBytes > 0 {
		if err := g.write("memory.max", strconv.FormatInt(m.MemoryBytes, 10)); err != nil {
			return err
		}
	}
	if m.MaxPids > 0 {
		if err := g.write("pids.max", strconv.FormatInt(m.MaxPids, 10)); err != nil {
			return err
		}
	}
	if m.CPUMillis > 0 {
		if err := g.write("cpu.max", fmt.Sprintf("%d 100000", m.CPUMillis*100)); err != nil {
			return err
		}
	}
	return nil
}

// errBelowUsage refuses a job limit the group is already over: lowering
// memory.max below the usage would make the kernel kill a process of the
// warm sandbox (its pre-started interpreter) before the job even began.
var errBelowUsage = errors.New("the job's memory limit is below what the sandbox already uses")

// setJobLimits applies the job's limits, refusing a memory limit below
// the group's usage, and notes the counters' values before the job.
func (g *guestGroup) setJobLimits(m initproto.VMMessage) error {
	if m.MemoryBytes > 0 {
		used, _ := strconv.ParseInt(strings.TrimSpace(g.read("memory.current")), 10, 64)
		if used > m.MemoryBytes {
			return fmt.Errorf("%w (%d bytes, limit %d)", errBelowUsage, used, m.MemoryBytes)
		}
	}
	if err := g.setLimits(m); err != nil {
		return err
	}
	g.resetCounts()
	return nil
}

// resetCounts notes the counters' values before a job: a session's next
// job reports only what happened during it.
func (g *guestGroup) resetCounts() {
	g.oomBefore = eventCount(g.read("memory.events"), "oom_kill")
	g.forkBefore = eventCount(g.read("pids.events"), "max")
}

// report is what the group's limits did during the job.
func (g *guestGroup) report() initproto.VMReport {
	return initproto.VMReport{
		OOMKills:     eventCount(g.read("memory.events"), "oom_kill") - g.oomBefore,
		ForkFailures: eventCount(g.read("pids.events"), "max") - g.forkBefore,
	}
}

// join moves pid (the reaper, before it starts anything) into the group.
func (g *guestGroup) join(pid int) error {
	return g.write("cgroup.procs", strconv.Itoa(pid))
}

// eventCount reads key's count from a cgroup events file's text.
func eventCount(text, key string) uint64 {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
