package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Version is the cgroup hierarchy a Manager drives.
type Version int

// The hierarchies a Manager can drive.
const (
	V1 Version = 1
	V2 Version = 2
)

// Controllers are the controllers a sandbox's limits need, on v1 (each its
// own hierarchy) and on v2 (enabled in cgroup.subtree_control).
var Controllers = []string{"memory", "pids", "cpu"}

type mountInfo struct {
	fsType     string
	root       string // the directory of the hierarchy mounted here
	mountPoint string
	superOpts  []string
}

func readMounts(file string) ([]mountInfo, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		line := sc.Text()
		dash := strings.Index(line, " - ")
		if dash < 0 {
			continue
		}
		pre := strings.Fields(line[:dash])
		post := strings.Fields(line[dash+3:])
		if len(pre) < 5 || len(post) < 3 {
			continue
		}
		out = append(out, mountInfo{fsType: post[0], root: unescapeMount(pre[3]), mountPoint: unescapeMount(pre[4]),
			superOpts: strings.Split(post[2], ",")})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escaping of spaces and tabs in mountinfo.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// hierarchies is what one mount table offers.
type hierarchies struct {
	// v2 is the mount point of a unified hierarchy whose root offers the
	// memory controller ("" when none does).
	v2 string
	// v1 maps each needed controller to its v1 mount point.
	v1 map[string]string
	// unified are all cgroup2 mounts, for finding a delegated subtree.
	unified []mountInfo
}

// usable reports whether the hierarchy can hold sandboxes' limits at all.
func (h hierarchies) usable() bool { return h.v2 != "" || len(h.v1) == len(Controllers) }

// hierarchiesIn reads the mount table file; prefix is prepended to every
// mount point (how this process reaches another process's mounts).
func hierarchiesIn(file, prefix string) (hierarchies, error) {
	mounts, err := readMounts(file)
	if err != nil {
		return hierarchies{}, fmt.Errorf("read %s: %w", file, err)
	}
	h := hierarchies{v1: map[string]string{}}
	for _, m := range mounts {
		m.mountPoint = prefix + m.mountPoint
		switch m.fsType {
		case "cgroup2":
			h.unified = append(h.unified, m)
			data, err := os.ReadFile(filepath.Join(m.mountPoint, "cgroup.controllers"))
			if err == nil && hasWord(string(data), "memory") && h.v2 == "" {
				h.v2 = m.mountPoint
			}
		case "cgroup":
			for _, c := range Controllers {
				if hasWord(strings.Join(m.superOpts, " "), c) {
					if _, seen := h.v1[c]; !seen {
						h.v1[c] = m.mountPoint
					}
				}
			}
		}
	}
	return h, nil
}

// findHierarchies returns the cgroup hierarchies this process can use.
//
// `ip netns exec` gives the command a mount namespace in which /sys is a
// fresh sysfs, with nothing mounted on /sys/fs/cgroup; an engine started that
// way would find no hierarchy and run without limits. Root can still reach
// the hierarchies the host mounted, through a process in the host's mount
// namespace: PID 1, or else the nearest ancestor in another mount namespace
// (where PID 1 is out of reach, as in some VMs' and containers' inits).
func findHierarchies() (hierarchies, error) {
	h, err := hierarchiesIn("/proc/self/mountinfo", "")
	if err != nil || h.usable() || os.Geteuid() != 0 {
		return h, err
	}
	pinnedMu.Lock()
	defer pinnedMu.Unlock()
	if pinned != nil {
		return *pinned, nil
	}
	for _, pid := range append([]int{1}, ancestors()...) {
		if host, ok := hierarchiesOf(pid); ok {
			pinned = &host
			return host, nil
		}
	}
	return h, nil
}

// pinned caches what hierarchiesOf found: its descriptors stay open for
// the life of the process, so they are opened once.
var (
	pinnedMu sync.Mutex
	pinned   *hierarchies
)

// hierarchiesOf reads process pid's mount table when pid is in another
// mount namespace; when that table has usable hierarchies, it opens each
// mount point through /proc/PID/root and names it through this process's
// descriptor (/proc/SELF/fd/N: valid for the spawner too, and after pid
// exits).
func hierarchiesOf(pid int) (hierarchies, bool) {
	ours, err1 := os.Readlink("/proc/self/ns/mnt")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err1 != nil || err2 != nil || ours == theirs {
		return hierarchies{}, false
	}
	h, err := hierarchiesIn(fmt.Sprintf("/proc/%d/mountinfo", pid), fmt.Sprintf("/proc/%d/root", pid))
	if err != nil || !h.usable() {
		return hierarchies{}, false
	}
	var fds []int
	pin := func(path string) (string, bool) {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", false
		}
		fds = append(fds, fd)
		return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd), true
	}
	fail := func() (hierarchies, bool) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return hierarchies{}, false
	}
	out := hierarchies{v1: map[string]string{}}
	if h.v2 != "" {
		var ok bool
		if out.v2, ok = pin(h.v2); !ok {
			return fail()
		}
	} else {
		for c, mnt := range h.v1 {
			var ok bool
			if out.v1[c], ok = pin(mnt); !ok {
				return fail()
			}
		}
	}
	return out, true
}

// ancestors lists this process's parent, grandparent, ... up to (not
// including) PID 1.
func ancestors() []int {
	var out []int
	pid := os.Getppid()
	for range 64 {
		if pid <= 1 {
			break
		}
		out = append(out, pid)
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			break
		}
		pid, _ = strconv.Atoi(fields[1])
	}
	return out
}

func hasWord(s, word string) bool {
	for _, f := range strings.Fields(s) {
		if f == word {
			return true
		}
	}
	return false
}

// words returns the space-separated words of a cgroup file (nil if unreadable).
func words(file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}
