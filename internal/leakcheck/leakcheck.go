// Package leakcheck counts what sandboxes can leave on a host — processes,
// mounts, cgroups, namespaces and network interfaces — so that tests can take
// a snapshot before creating sandboxes and prove that nothing new is left
// after. It only reads; it never cleans up (cleaning would hide the bug).
package leakcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// InitArgv0 is the argv[0] every sandbox init runs under.
const InitArgv0 = "scratchrun-sandbox-init"

// Snapshot is what existed at one moment.
type Snapshot struct {
	Processes  map[string]bool // "pid argv0" of sandbox inits and processes in sandbox cgroups
	Mounts     map[string]bool // host mount points that belong to ScratchRun
	Cgroups    map[string]bool // group directories below the sandboxes' parent
	Namespaces map[string]bool // "type:[inode]" of every namespace a process holds
	Interfaces map[string]bool // network interface names in the host's namespace
}

// Options tell Take where ScratchRun keeps its things.
type Options struct {
	// CgroupParent is the cgroup directory name sandboxes live under.
	CgroupParent string
	// MountMarkers are substrings of host mount points that belong to us
	// (the state directory, the image directory).
	MountMarkers []string
}

// Take records the current state of the host.
func Take(o Options) Snapshot {
	s := Snapshot{
		Processes: map[string]bool{}, Mounts: map[string]bool{}, Cgroups: map[string]bool{},
		Namespaces: map[string]bool{}, Interfaces: map[string]bool{},
	}
	cgroupDirs := s.takeCgroups(o.CgroupParent)
	inCgroup := map[string]bool{}
	for _, dir := range cgroupDirs {
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(data)) {
			inCgroup[pid] = true
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	self := fmt.Sprint(os.Getpid())
	for _, p := range procs {
		pid := filepath.Base(p)
		if pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue // gone already
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if argv0 == InitArgv0 || inCgroup[pid] {
			s.Processes[pid+" "+argv0] = true
		}
		for _, ns := range []string{"mnt", "pid", "net", "user", "ipc", "uts", "cgroup"} {
			if link, err := os.Readlink(filepath.Join(p, "ns", ns)); err == nil {
				s.Namespaces[link] = true
			}
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			for _, m := range o.MountMarkers {
				if m != "" && strings.Contains(f[4], m) {
					s.Mounts[f[4]] = true
				}
			}
		}
	}
	if entries, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range entries {
			s.Interfaces[e.Name()] = true
		}
	}
	return s
}

func (s *Snapshot) takeCgroups(parent string) []string {
	if parent == "" {
		return nil
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
