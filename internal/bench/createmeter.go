package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// ProcessAccount is a Meter whose Accounted is the CPU of this process and
// of everything it starts from the moment it joined the account: a cpuacct
// group of its own on cgroup v1 (a sandbox's cgroup there has no cpuacct
// controller, so its processes stay in the account they were born in); on
// cgroup v2, a group of its own plus the sandboxes' parent directories
// given (a v2 parent's cpu.stat keeps what its removed children used).
type ProcessAccount struct {
	dir string
	// usage are the files summed: cpuacct.usage (ns) or cpu.stat
	// (usage_usec).
	usage []string
	// home is the cgroup.procs file this process came from.
	home string
}

const cgroupRoot = "/sys/fs/cgroup"

// JoinProcessAccount moves this process into a new accounting group named
// after it; sandboxParents are the v2 directories (below the hierarchy's
// root) sandboxes are made in. Close moves it back and removes the group.
func JoinProcessAccount(sandboxParents ...string) (*ProcessAccount, error) {
	name := fmt.Sprintf("scratchrun-bench-%d", os.Getpid())
	a := &ProcessAccount{}
	if fi, err := os.Stat(filepath.Join(cgroupRoot, "cpuacct")); err == nil && fi.IsDir() {
		a.dir = filepath.Join(cgroupRoot, "cpuacct", name)
		a.home = filepath.Join(cgroupRoot, "cpuacct", "cgroup.procs")
		a.usage = []string{filepath.Join(a.dir, "cpuacct.usage")}
	} else if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		a.dir = filepath.Join(cgroupRoot, name)
		a.home = filepath.Join(cgroupRoot, "cgroup.procs")
		a.usage = []string{filepath.Join(a.dir, "cpu.stat")}
		for _, p := range sandboxParents {
			a.usage = append(a.usage, filepath.Join(cgroupRoot, p, "cpu.stat"))
		}
	} else {
		return nil, fmt.Errorf("no cpuacct (cgroup v1) or cgroup v2 hierarchy at %s", cgroupRoot)
	}
	if err := os.Mkdir(a.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create accounting group: %w", err)
	}
	if err := os.WriteFile(filepath.Join(a.dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		_ = os.Remove(a.dir)
		return nil, fmt.Errorf("join accounting group %s: %w", a.dir, err)
	}
	return a, nil
}

// Close moves this process back and removes the group (once what it
// started has ended: stop the engine first).
func (a *ProcessAccount) Close() error {
	if err := os.WriteFile(a.home, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("leave accounting group: %w", err)
	}
	return cgroups.RemoveDir(a.dir, nil)
}

// Sample implements Meter.
func (a *ProcessAccount) Sample() CPUSample {
	s := CPUSample{KernelThreads: kernelThreadsCPU(), Machine: cpuTime(), Engine: selfCPU(), Spawner: spawnerCPU()}
	for _, f := range a.usage {
		s.Accounted += usageIn(f)
	}
	return s
}

// usageIn reads a cpuacct.usage (nanoseconds) or cpu.stat (usage_usec)
// file.
func usageIn(file string) time.Duration {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	if strings.HasSuffix(file, "cpuacct.usage") {
		n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return time.Duration(n)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return time.Duration(n) * time.Microsecond
		}
	}
	return 0
}

// selfCPU is this process's user and system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spawnerCPU is the time on CPU of this process's children named as the
// spawner helper is (scratchrun-spawn, or spawn-HASH when built at run
// time; the kernel keeps 15 bytes of a name).
func spawnerCPU() time.Duration {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var total time.Duration
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, pid := range strings.Fields(string(data)) {
			comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
			if name := strings.TrimSpace(string(comm)); !strings.HasPrefix(name, "scratchrun-spaw") && !strings.HasPrefix(name, "spawn-") {
				continue
			}
			total += schedstatCPU(pid)
		}
	}
	return total
}

// schedstatCPU is process pid's time on CPU (its first thread's: the
// processes measured here have one).
func schedstatCPU(pid string) time.Duration {
	sched, err := os.ReadFile(filepath.Join("/proc", pid, "schedstat"))
	if err != nil {
		return 0
	}
	if v := strings.Fields(string(sched)); len(v) > 0 {
		n, _ := strconv.ParseInt(v[0], 10, 64)
		return time.Duration(n)
	}
	return 0
}

// pfKthread is the kernel's PF_KTHREAD task flag (/proc/PID/stat's ninth
// field).
const pfKthread = 0x00200000

// kernelThreadsCPU is the time on CPU of every kernel thread, from each
// one's schedstat (nanoseconds, not the 10 ms ticks of stat).
func kernelThreadsCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces: fields count from its ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 7 {
			continue
		}
		flags, _ := strconv.ParseUint(f[6], 10, 64)
		if flags&pfKthread == 0 {
			continue
		}
		total += schedstatCPU(e.Name())
	}
	return total
}
