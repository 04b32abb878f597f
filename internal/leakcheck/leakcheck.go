// Package leakcheck counts what sandboxes can leave on a host — processes,
// mounts, cgroups, namespaces and network interfaces — so that tests can take
// a snapshot before creating sandboxes and prove that nothing new is left
// after. It only reads; it never cleans up (cleaning would hide the bug).
package leakcheck

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Snapshot is what existed at one moment, within one test run's scope.
type Snapshot struct {
	Processes  map[string]bool // "pid argv0" of processes in our sandboxes' cgroups or below us
	Mounts     map[string]bool // host mount points that belong to ScratchRun
	Cgroups    map[string]bool // group directories below the sandboxes' parent
	Namespaces map[string]bool // "type:[inode]" held by those processes or by fds of ours
	Interfaces map[string]bool // network interface names in the host's namespace
}

// Options tell Take where this test run's sandboxes live. Giving each test
// binary its own cgroup parent and state directory keeps concurrent test runs
// from seeing each other's sandboxes as leaks.
type Options struct {
	// CgroupParent is the cgroup directory name sandboxes live under.
	CgroupParent string
	// MountMarkers are substrings of host mount points that belong to us
	// (the state directory, the image directory).
	MountMarkers []string
	// BackendMounts are prefixes of mount points that an open backend keeps
	// for its whole life (the namespaces backend's idmapped image views,
	// made on an image's first use): a check while the backend is open
	// ignores them; the check after it closed leaves this empty and counts
	// them.
	BackendMounts []string
}

// Take records the current state of the host.
//
// A namespace outlives its processes only while something pins it: a bind
// mount (caught as a mount) or an open file descriptor (caught in our own fd
// table, the engine's). So namespaces are counted for the processes in scope
// and for our own descriptors, not for unrelated processes on the machine.
func Take(o Options) Snapshot {
	s := Snapshot{
		Processes: map[string]bool{}, Mounts: map[string]bool{}, Cgroups: map[string]bool{},
		Namespaces: map[string]bool{}, Interfaces: map[string]bool{},
	}
	cgroupDirs := s.takeCgroups(o.CgroupParent)
	inScope := map[string]bool{}
	for _, dir := range cgroupDirs {
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(data)) {
			inScope[pid] = true
		}
	}
	self := fmt.Sprint(os.Getpid())
	parents := map[string]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		parents[filepath.Base(p)] = parentPID(p)
	}
	for pid := range parents {
		if pid != self && descends(pid, self, parents) {
			inScope[pid] = true
		}
	}
	for pid := range inScope {
		p := filepath.Join("/proc", pid)
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue // gone already
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		s.Processes[pid+" "+argv0] = true
		for _, ns := range []string{"mnt", "pid", "net", "user", "ipc", "uts", "cgroup"} {
			if link, err := os.Readlink(filepath.Join(p, "ns", ns)); err == nil {
				s.Namespaces[link] = true
			}
		}
	}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && strings.Contains(link, ":[") && !strings.HasPrefix(link, "pipe:") &&
			!strings.HasPrefix(link, "socket:") && !strings.HasPrefix(link, "anon_inode:") {
			s.Namespaces[link] = true
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			if hasPrefix(f[4], o.BackendMounts) {
				continue
			}
			for _, m := range o.MountMarkers {
				if m != "" && strings.Contains(f[4], m) {
					s.Mounts[f[4]] = true
				}
			}
		}
	}
	// Through netlink, not /sys/class/net: sysfs shows the namespace it was
	// mounted in, not the caller's.
	if ifaces, err := net.Interfaces(); err == nil {
		for _, i := range ifaces {
			s.Interfaces[i.Name] = true
		}
	}
	return s
}

func parentPID(procDir string) string {
	data, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return ""
	}
	st := string(data)
	fields := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	if len(fields) < 2 {
		return ""
	}
	return fields[1]
}

func descends(pid, ancestor string, parents map[string]string) bool {
	for range 64 {
		pid = parents[pid]
		if pid == "" || pid == "0" {
			return false
		}
		if pid == ancestor {
			return true
		}
	}
	return false
}

func (s *Snapshot) takeCgroups(parent string) []string {
	if parent == "" {
		return nil
	}
	// The parent itself counts too: a test run that created it must remove it.
	for _, pattern := range []string{"/sys/fs/cgroup/*/" + parent, "/sys/fs/cgroup/" + parent} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			s.Cgroups[m] = true
		}
	}
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/" + parent + "/*", "/sys/fs/cgroup/" + parent + "/*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				s.Cgroups[m] = true
				dirs = append(dirs, m)
			}
		}
	}
	return dirs
}

// NewSince lists, one line each, what exists now that did not before.
func NewSince(before, after Snapshot) []string {
	var out []string
	add := func(kind string, b, a map[string]bool) {
		for k := range a {
			if !b[k] {
				out = append(out, kind+" "+k)
			}
		}
	}
	add("process", before.Processes, after.Processes)
	add("mount", before.Mounts, after.Mounts)
	add("cgroup", before.Cgroups, after.Cgroups)
	add("namespace", before.Namespaces, after.Namespaces)
	add("interface", before.Interfaces, after.Interfaces)
	sort.Strings(out)
	return out
}

// WaitClean polls until nothing new exists compared with before, or timeout
// passes, and returns what is still left (nil when clean). Polling covers the
// kernel's own asynchronous release of namespaces after the last process exits.
func WaitClean(before Snapshot, o Options, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		left := NewSince(before, Take(o))
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasPrefix reports whether s starts with one of prefixes.
func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
