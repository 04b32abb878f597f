package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are what one sandbox's group enforces. Zero fields are left unlimited.
type Limits struct {
	// MemoryBytes caps memory, swap included.
	MemoryBytes int64
	// MaxPids caps processes and threads together.
	MaxPids int64
	// CPUs caps CPU time, in cores (1.5 = one and a half cores).
	CPUs float64
	// Background starts the group at a tenth of the normal CPU weight (see
	// SetBackground).
	Background bool
}

// Manager creates sandbox groups below one parent directory of the hierarchy.
//
// Several engines on one host share the parent (each sandbox's group is
// named after its engine): creating a group holds a shared lock on the
// parent directory, and RemoveParent removes it only under an exclusive one
// and only when it holds no group, so that no engine waits for another or
// removes the directory another is creating a group in.
type Manager struct {
	version Version
	// dirs are the parent directories: one on v2, one per controller on v1.
	dirs map[string]string
	// enforced are the controllers whose limits apply (all of Controllers,
	// except in a delegated v2 subtree that does not offer some).
	enforced map[string]bool
	// delegated is the cgroup v2 directory delegated to this process that
	// the engine moved into a leaf of ("" when not delegated).
	delegated string
	// why says why some controllers are missing.
	why string
	// budget is the parent's memory limit this engine set (0: none), given
	// again to a parent directory it re-creates.
	budget atomic.Int64
}

// ErrUnavailable is returned by New when no usable, writable hierarchy exists
// (an unprivileged user on cgroup v1, say).
var ErrUnavailable = errors.New("no writable cgroup hierarchy with the memory, pids and cpu controllers")

// New finds the mounted hierarchy and prepares the parent directory named
// parent (e.g. "scratchrun") below it: at the hierarchy's root when this
// process may write there (root), else below this process's own cgroup v2
// when that is delegated to it (an ordinary user in a systemd scope with
// Delegate=yes, as rootless Podman uses), moving the process itself into
// a leaf (LeafName) next to the parent. A delegated subtree may lack
// controllers: Missing says which.
func New(parent string) (*Manager, error) {
	if parent == "" || strings.Contains(parent, "..") || parent == LeafName {
		return nil, fmt.Errorf("cgroup parent %q is not a plain name", parent)
	}
	h, err := findHierarchies()
	if err != nil {
		return nil, err
	}
	var rootErr error
	switch {
	case h.v2 != "":
		m, err := newV2(h.v2, parent)
		if err == nil {
			return m, nil
		}
		rootErr = err
	case len(h.v1) == len(Controllers):
		m, err := newV1(h.v1, parent)
		if err == nil {
			return m, nil
		}
		rootErr = err
	default:
		rootErr = ErrUnavailable
	}
	m, derr := newDelegated(h, parent)
	if derr == nil {
		return m, nil
	}
	return nil, fmt.Errorf("%w; %v", rootErr, derr)
}

func newV1(mounts map[string]string, parent string) (*Manager, error) {
	m := &Manager{version: V1, dirs: map[string]string{}, enforced: map[string]bool{}}
	for controller, mnt := range mounts {
		dir := filepath.Join(mnt, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: create %s: %v", ErrUnavailable, dir, err)
		}
		if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
			return nil, fmt.Errorf("%w: %s is not writable: %v", ErrUnavailable, dir, err)
		}
		m.dirs[controller] = dir
		m.enforced[controller] = true
	}
	return m, nil
}

func newV2(mnt, parent string) (*Manager, error) {
	dir := filepath.Join(mnt, parent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrUnavailable, dir, err)
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return nil, fmt.Errorf("%w: %s is not writable: %v", ErrUnavailable, dir, err)
	}
	m := &Manager{version: V2, dirs: map[string]string{"": dir}, enforced: map[string]bool{}}
	for _, c := range Controllers {
		m.enforced[c] = true
	}
	// Controllers must be enabled at every level from the mount down to us.
	if err := write(mnt, "cgroup.subtree_control", m.enableLine()); err != nil {
		return nil, fmt.Errorf("%w: enable %s in %s: %v", ErrUnavailable, m.enableLine(), mnt, err)
	}
	if err := m.ensureParent(dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return m, nil
}

// enableLine is what cgroup.subtree_control gets on v2: "+memory +pids +cpu",
// or the enforced subset.
func (m *Manager) enableLine() string {
	var on []string
	for _, c := range Controllers {
		if m.enforced[c] {
			on = append(on, "+"+c)
		}
	}
	return strings.Join(on, " ")
}

// Version reports which hierarchy the manager drives.
func (m *Manager) Version() Version { return m.version }

// Missing lists the controllers of Controllers whose limits this manager
// cannot apply, and why (empty when it applies them all).
func (m *Manager) Missing() (controllers []string, why string) {
	for _, c := range Controllers {
		if !m.enforced[c] {
			controllers = append(controllers, c)
		}
	}
	return controllers, m.why
}

// Delegated is the cgroup v2 directory delegated to this process that the
// manager works in ("" when it works at the hierarchy's root).
func (m *Manager) Delegated() string { return m.delegated }

// Parents are the parent directories (one per v1 controller, one on v2).
func (m *Manager) Parents() []string {
	var out []string
	for _, d := range m.dirs {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// ensureParent creates parent directory dir if it is missing and, on v2,
// enables the controllers for its children (again: another engine may have
// removed and re-created it).
func (m *Manager) ensureParent(dir string) error {
	// One mkdir tells whether it was there (every sandbox's creation
	// comes here, once per hierarchy).
	created := true
	if err := os.Mkdir(dir, 0o755); os.IsExist(err) {
		created = false
	} else if err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup parent %s: %w", dir, err)
		}
	}
	if m.version == V2 && m.enableLine() != "" {
		if err := write(dir, "cgroup.subtree_control", m.enableLine()); err != nil {
			return err
		}
	}
	if created {
		return m.reapplyBudget(dir)
	}
	return nil
}

// lockParent makes sure parent directory dir exists and takes a shared lock
// on it, which keeps every engine's RemoveParent from removing it until the
// returned file is closed.
func (m *Manager) lockParent(dir string) (*os.File, error) {
	for range 100 {
		if err := m.ensureParent(dir); err != nil {
			return nil, err
		}
		f, err := os.Open(dir)
		if os.IsNotExist(err) {
			continue // removed by another engine just now
		}
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock cgroup parent %s: %w", dir, err)
		}
		if sameFile(f, dir) {
			return f, nil
		}
		// Removed (and perhaps re-created) while we waited for the lock.
		f.Close()
	}
	return nil, fmt.Errorf("cgroup parent %s keeps disappearing", dir)
}

// sameFile reports whether the open file f is still what path names.
func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// Create makes the group for sandbox id and applies limits.
func (m *Manager) Create(id string, limits Limits) (*Group, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return nil, fmt.Errorf("cgroup id %q is not a plain name", id)
	}
	g := &Group{version: m.version, dirs: map[string]string{}, enforced: m.enforced}
	for controller, parent := range m.dirs {
		dir := filepath.Join(parent, id)
		lock, err := m.lockParent(parent)
		if err != nil {
			g.Destroy()
			return nil, err
		}
		err = os.Mkdir(dir, 0o755)
		lock.Close()
		if err != nil {
			g.Destroy()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		g.dirs[controller] = dir
	}
	if err := g.apply(limits); err != nil {
		g.Destroy()
		return nil, err
	}
	return g, nil
}

// SweepOne kills every process left in the group named id (below the
// parent) and removes it: what a crashed engine left behind. It reports 1 when
// it removed a group.
func (m *Manager) SweepOne(id string) (int, error) {
	g := &Group{version: m.version, dirs: map[string]string{}, enforced: m.enforced}
	for controller, p := range m.dirs {
		if _, err := os.Stat(filepath.Join(p, id)); err == nil {
			g.dirs[controller] = filepath.Join(p, id)
		}
	}
	if len(g.dirs) == 0 {
		return 0, nil
	}
	g.KillAll()
	if err := g.Destroy(); err != nil {
		return 0, err
	}
	return 1, nil
}

// Sweep kills and removes, as SweepOne, every group below the parent
// that keep does not claim (a nil keep claims none), and counts them.
// Groups stand under each controller's parent on cgroup v1: each name is
// swept once. It goes on past a group it cannot remove, and returns every
// error.
func (m *Manager) Sweep(keep func(id string) bool) (int, error) {
	names := map[string]bool{}
	for _, dir := range m.Leftovers() {
		names[filepath.Base(dir)] = true
	}
	removed := 0
	var errs []error
	for name := range names {
		if keep != nil && keep(name) {
			continue
		}
		n, err := m.SweepOne(name)
		removed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// HierarchyDirs lists the directory rel (a path below a hierarchy's
// root) on every mounted hierarchy where it exists: on cgroup v1 runsc
// adds controllers of its own (cpuacct, freezer, devices, ...) and the
// named systemd hierarchy has its own directories, beside the ones a
// Manager uses.
func HierarchyDirs(rel string) []string {
	var out []string
	for _, pattern := range []string{filepath.Join(hierarchyRoot, "*", rel), filepath.Join(hierarchyRoot, rel)} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				out = append(out, m)
			}
		}
	}
	return out
}

// hierarchyRoot is where the cgroup hierarchies are mounted.
const hierarchyRoot = "/sys/fs/cgroup"

// RemoveParent removes the parent directories that hold no group. A parent
// that still holds groups (another engine's) stays, at once and without
// error; so does one another engine is creating a group in. Only a parent
// that just lost its last group is retried briefly: the kernel releases a
// removed group asynchronously.
func (m *Manager) RemoveParent() error {
	var errs []error
	for _, dir := range m.dirs {
		if err := removeUnusedDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeUnusedDir removes cgroup directory dir unless it has child groups
// or another engine holds its lock.
func removeUnusedDir(dir string) error {
	f, err := os.Open(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another engine is creating a group in it
	}
	for range 100 {
		if hasChildGroups(dir) {
			return nil
		}
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// hasChildGroups reports whether cgroup directory dir has child groups.
func hasChildGroups(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// Leftovers lists group directories below the parent, on every controller
// (for leak checks and sweeping).
func (m *Manager) Leftovers() []string {
	var out []string
	for _, parent := range m.dirs {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, filepath.Join(parent, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out
}

// Group is the control group of one sandbox.
type Group struct {
	version Version
	dirs    map[string]string
	// enforced are the controllers whose limits apply (the manager's).
	enforced map[string]bool
	// demand estimates the CPU waits its threads' schedstat does not
	// show yet (CPUDemand).
	demand demandMemo
}

func (g *Group) dir(controller string) string {
	if g.version == V2 {
		return g.dirs[""]
	}
	return g.dirs[controller]
}

func (g *Group) apply(l Limits) error {
	if !g.enforced["pids"] {
		l.MaxPids = 0
	}
	if !g.enforced["cpu"] {
		l.CPUs, l.Background = 0, false
	}
	if l.MemoryBytes > 0 {
		if err := g.SetMemory(l.MemoryBytes); err != nil {
			return err
		}
	}
	if l.MaxPids > 0 {
		if err := write(g.dir("pids"), "pids.max", strconv.FormatInt(l.MaxPids, 10)); err != nil {
			return err
		}
	}
	if l.Background {
		if err := g.SetBackground(true); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		const period = 100000
		quota := int64(l.CPUs * period)
		if g.version == V2 {
			return write(g.dir("cpu"), "cpu.max", fmt.Sprintf("%d %d", quota, period))
		}
		if err := write(g.dir("cpu"), "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
			return err
		}
		return write(g.dir("cpu"), "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
	}
	return nil
}

// SetBackground gives the group a tenth of the normal CPU weight (on) or the
// normal weight back (off). A warm sandbox is built in the background: its
// processes then get CPU time mostly when the calls being served leave
// some, instead of taking an equal share from them; it gets the normal
// weight when its job arrives. (A tenth, not the minimum: a build must still
// finish within its timeouts on a busy machine.)
func (g *Group) SetBackground(on bool) error {
	if !g.enforced["cpu"] {
		return nil
	}
	if g.version == V2 {
		return write(g.dir("cpu"), "cpu.weight", map[bool]string{true: "10", false: "100"}[on])
	}
	return write(g.dir("cpu"), "cpu.shares", map[bool]string{true: "102", false: "1024"}[on])
}

// SetMemory sets the memory limit, swap included, to bytes.
func (g *Group) SetMemory(bytes int64) error {
	if !g.enforced["memory"] {
		return nil
	}
	v := strconv.FormatInt(bytes, 10)
	dir := g.dir("memory")
	if g.version == V2 {
		if err := write(dir, "memory.max", v); err != nil {
			return err
		}
		// No swap at all: a sandbox over its limit is killed, not slowed.
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			return write(dir, "memory.swap.max", "0")
		}
		return nil
	}
	// memsw must stay >= the plain limit at every moment: lowering sets the
	// plain limit first, raising sets memsw first. EBUSY (usage above the new
	// limit) is returned as it is, so callers can tell it apart.
	memsw := filepath.Join(dir, "memory.memsw.limit_in_bytes")
	if _, err := os.Stat(memsw); err != nil {
		return write(dir, "memory.limit_in_bytes", v)
	}
	err := write(dir, "memory.limit_in_bytes", v)
	if errors.Is(err, syscall.EINVAL) {
		if err := write(dir, "memory.memsw.limit_in_bytes", v); err != nil {
			return err
		}
		return write(dir, "memory.limit_in_bytes", v)
	}
	if err != nil {
		return err
	}
	return write(dir, "memory.memsw.limit_in_bytes", v)
}

// ProcsFiles are the group's cgroup.procs files (one per hierarchy on v1):
// writing a pid to each moves that process into the group.
func (g *Group) ProcsFiles() []string {
	seen := map[string]bool{}
	var out []string
	for _, dir := range g.dirs {
		if !seen[dir] {
			seen[dir] = true
			out = append(out, filepath.Join(dir, "cgroup.procs"))
		}
	}
	sort.Strings(out)
	return out
}

// AddProcess moves pid (all its threads) into the group.
func (g *Group) AddProcess(pid int) error {
	seen := map[string]bool{}
	for _, dir := range g.dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if err := write(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// OOMKills reports how many processes the kernel killed for the memory limit.
func (g *Group) OOMKills() int64 {
	file := "memory.oom_control"
	if g.version == V2 {
		file = "memory.events"
	}
	return eventCount(filepath.Join(g.dir("memory"), file), "oom_kill")
}

// PidsLimitHits reports how many fork and clone calls the group's process
// limit refused (pids.events on v1 and v2).
func (g *Group) PidsLimitHits() int64 {
	return eventCount(filepath.Join(g.dir("pids"), "pids.events"), "max")
}

// eventCount reads the counter named key from a cgroup events file of
// "key value" lines (0 when the file or key is missing).
func eventCount(file, key string) int64 {
	data, err := readSmall(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// Procs lists the pids in the group (on every controller).
func (g *Group) Procs() []int {
	set := map[int]bool{}
	for _, dir := range g.dirs {
		for _, pid := range procsIn(dir) {
			set[pid] = true
		}
	}
	out := make([]int, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	return out
}

// procsIn lists the pids in cgroup directory dir.
func procsIn(dir string) []int {
	data, err := readSmall(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// KillProcs sends SIGKILL to every process in cgroup directory dir (any
// hierarchy, also ones this package does not manage).
func KillProcs(dir string) {
	for _, pid := range procsIn(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// RemoveDir removes cgroup directory dir (gone already is fine). The kernel
// releases a group just after its last task is reaped, so a busy directory
// is retried for about a second, calling beforeRetry (when not nil) first.
func RemoveDir(dir string, beforeRetry func()) error {
	var err error
	for range 200 {
		err = os.Remove(dir)
		if err == nil || os.IsNotExist(err) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		if beforeRetry != nil {
			beforeRetry()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// KillAll sends SIGKILL to every process in the group until it is empty or a
// second has passed. It reports whether the group ended empty.
func (g *Group) KillAll() bool {
	if g.version == V2 {
		_ = write(g.dir(""), "cgroup.kill", "1")
	}
	deadline := time.Now().Add(time.Second)
	for {
		procs := g.Procs()
		if len(procs) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, pid := range procs {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Destroy removes the group's directories. The group must be empty; Destroy
// retries briefly because the kernel releases a group just after its last task
// is reaped.
func (g *Group) Destroy() error {
	var errs []error
	for controller, dir := range g.dirs {
		if err := RemoveDir(dir, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(g.dirs, controller)
	}
	return errors.Join(errs...)
}

// MemoryUsage reports the group's current memory use in bytes (0 if unknown).
func (g *Group) MemoryUsage() int64 {
	file := "memory.usage_in_bytes"
	if g.version == V2 {
		file = "memory.current"
	}
	data, err := readSmall(filepath.Join(g.dir("memory"), file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}
