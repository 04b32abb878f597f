package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// LeafName is the child of a delegated cgroup that the engine moves itself
// into: cgroup v2 lets a group hand controllers to its children only while
// no process sits in the group itself ("no internal processes").
const LeafName = "scratchrun-engine"

// DelegationHint tells an ordinary user how to get a delegated cgroup on a
// host with systemd, as rootless container engines do.
const DelegationHint = "systemd-run --user --scope -p Delegate=yes scratchrun ..."

// ownCgroupV2 returns this process's cgroup v2 path ("0::/path" in
// /proc/self/cgroup).
func ownCgroupV2() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process has no cgroup v2 path")
}

// ownCgroupDir finds this process's cgroup v2 directory in the unified
// mounts of h.
func ownCgroupDir(h hierarchies) (string, error) {
	own, err := ownCgroupV2()
	if err != nil {
		return "", err
	}
	for _, m := range h.unified {
		rel, ok := strings.CutPrefix(own, strings.TrimSuffix(m.root, "/"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			continue
		}
		dir := filepath.Join(m.mountPoint, rel)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no mounted cgroup2 hierarchy holds this process's cgroup %s", own)
}

// newDelegated uses this process's own cgroup v2 when it is delegated to it
// (the directory, its cgroup.procs and cgroup.subtree_control writable, as
// systemd's Delegate=yes or a chown by root makes them): the engine moves
// itself into LeafName below it, and sandboxes' groups go below parent
// next to it. Controllers the delegated group does not offer are reported
// by Missing rather than refused: the groups still track and kill every
// process of a sandbox.
func newDelegated(h hierarchies, parent string) (*Manager, error) {
	dir, err := ownCgroupDir(h)
	if err != nil {
		return nil, err
	}
	// An engine already in a leaf (started by one, or a second engine in the
	// same scope) uses the leaf's parent.
	if filepath.Base(dir) == LeafName {
		dir = filepath.Dir(dir)
	}
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return nil, fmt.Errorf("this process's cgroup %s is not delegated to it (%s is not writable; with systemd, start it as %s)", dir, p, DelegationHint)
		}
	}
	leaf := filepath.Join(dir, LeafName)
	if err := os.Mkdir(leaf, 0o755); err != nil && !os.IsExist(err) {
		return nil, fmt.Errorf("create %s: %w", leaf, err)
	}
	if err := write(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		return nil, fmt.Errorf("move the engine into %s: %w", leaf, err)
	}
	m := &Manager{version: V2, dirs: map[string]string{"": filepath.Join(dir, parent)}, enforced: map[string]bool{}, delegated: dir}
	var offered []string
	for _, c := range words(filepath.Join(dir, "cgroup.controllers")) {
		if slices.Contains(Controllers, c) {
			offered = append(offered, c)
		}
	}
	if len(offered) > 0 {
		if err := write(dir, "cgroup.subtree_control", "+"+strings.Join(offered, " +")); err != nil {
			m.why = fmt.Sprintf("%s holds processes besides ScratchRun, so it cannot hand controllers to sandboxes (start scratchrun in a cgroup of its own: %s): %v", dir, DelegationHint, err)
			offered = nil
		}
	}
	for _, c := range offered {
		m.enforced[c] = true
	}
	if missing, _ := m.Missing(); len(missing) > 0 && m.why == "" {
		m.why = fmt.Sprintf("the cgroup delegated to this user, %s, offers no %s controller", dir, strings.Join(missing, ", "))
	}
	if err := m.ensureParent(m.dirs[""]); err != nil {
		return nil, err
	}
	return m, nil
}

// limitOf is the sandbox limit each controller enforces.
var limitOf = map[string]sandbox.Limit{"memory": sandbox.LimitMemory, "pids": sandbox.LimitProcesses, "cpu": sandbox.LimitCPU}

// Unenforced lists the sandbox limits m cannot apply: all of them when m is
// nil (no usable hierarchy).
func Unenforced(m *Manager) []sandbox.Limit {
	if m == nil {
		return append([]sandbox.Limit(nil), sandbox.HostLimits...)
	}
	missing, _ := m.Missing()
	var out []sandbox.Limit
	for _, c := range missing {
		out = append(out, limitOf[c])
	}
	return sandbox.SortLimits(out)
}
