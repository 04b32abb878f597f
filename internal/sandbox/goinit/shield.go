package goinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp/bpfload"
)

// On Linux a pid namespace's init is out of user code's reach: the kernel
// drops every signal its namespace sends it that it has no handler for
// (SIGKILL and SIGSTOP included), and its /proc entries belong to the host's
// root. gVisor's Sentry does neither: user code (root, with CAP_KILL and
// CAP_DAC_OVERRIDE) could kill the reaper, which ends every process of the
// program and loses its result, read the reaper's descriptors, I/O and
// namespaces, and change its out-of-memory score or limits. The reaper
// shields itself before any user code runs:
//
//   - its threads are all made first (prewarmThreads), so that their ids are
//     exactly 1..last, below every pid user code will have;
//   - user code's system calls that signal a task (kill, tkill, tgkill,
//     rt_sigqueueinfo, rt_tgsigqueueinfo), name one for a signal later
//     (pidfd_open, fcntl F_SETOWN), join its process group (setpgid) or
//     change its limits (prlimit64) are
//     refused when they name one of those ids; a signal "succeeds" doing
//     nothing, as Linux's does;
//   - once user code's first process has started, in the process group the
//     reaper had (so that, as on Linux, it is no group's leader and may
//     start a session), the reaper moves to a group of its own
//     (leaveUserGroup), which the filter keeps user code from joining: a
//     signal to user code's group never reaches it;
//   - /proc/1's guarded entries and /proc/2..last are hidden.
//
// What it cannot cover: a thread the Go runtime makes later (it keeps the
// threads it made, so it needs none while the reaper's few goroutines are
// all it runs) would not be shielded.

// ownGroup is set once the reaper has left user code's process group.
var ownGroup bool

// leaveUserGroup moves the reaper to a process group of its own, leaving
// user code's first process in the one they shared. Nothing of user code
// has run yet: the interpreter it starts is still loading when this runs.
func leaveUserGroup() {
	if !ownGroup {
		ownGroup = syscall.Setpgid(0, 0) == nil
	}
}

// userProcessGroup is how user code's first process starts: in the
// reaper's group, which the reaper then leaves; if it has left already (a
// cold start after a pre-started interpreter died), in a group of its own.
func userProcessGroup() *syscall.SysProcAttr {
	if ownGroup {
		return &syscall.SysProcAttr{Setpgid: true}
	}
	return nil
}

// reaperThreads is how many threads prewarmThreads has the runtime make
// beyond the ones it has: the reaper's goroutines never need more at once.
const reaperThreads = 4

// prewarmThreads makes the runtime start its threads now: goroutines each
// lock a thread and wait until all have one; the threads stay, idle, for
// whatever the reaper runs later.
func prewarmThreads() {
	runtime.GOMAXPROCS(1)
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	for range reaperThreads {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			ready.Done()
			<-release
			runtime.UnlockOSThread() // the thread goes back to the runtime, not away
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
}

// lastThread is the highest id of the process's threads.
func lastThread() (int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	last := 0
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid > last {
			last = tid
		}
	}
	if last == 0 {
		return 0, errors.New("no threads in /proc/self/task")
	}
	return last, nil
}

// Entries of /proc/1 Linux lets only the init's owner (or a tracer) read
// or write, under the reaper's /proc: directories and files others may not
// read are hidden (an empty read-only tmpfs, /dev/null), files others may
// read but not write are made read-only.
var (
	guardedInitDirs  = []string{"fd", "fdinfo", "ns", "task", "map_files", "attr"}
	guardedInitFiles = []string{
		"auxv", "environ", "io", "mem", "maps", "smaps", "smaps_rollup", "pagemap", "stack", "syscall",
		"personality", "wchan", "sched", "clear_refs",
	}
	frozenInitFiles = []string{
		"comm", "coredump_filter", "oom_adj", "oom_score_adj", "uid_map", "gid_map", "setgroups",
		"children", "timerslack_ns", "loginuid", "sessionid",
	}
)

// hideInitProc hides /proc/1's guarded entries and every /proc/N of the
// reaper's other threads (2..last) in the /proc under root.
func hideInitProc(root string, last int) error {
	const (
		hideDir = iota
		hideFile
		freeze
	)
	apply := func(target string, how int) error {
		switch how {
		case hideDir:
			return mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=4")
		case hideFile:
			return mount("/dev/null", target, "", unix.MS_BIND, "")
		}
		// A regular file (not /dev/null, which a read-only mount leaves
		// writable): writes fail.
		if err := mount(target, target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	proc := filepath.Join(root, "proc")
	for _, group := range []struct {
		names []string
		how   int
	}{{guardedInitDirs, hideDir}, {guardedInitFiles, hideFile}, {frozenInitFiles, freeze}} {
		for _, name := range group.names {
			target := filepath.Join(proc, "1", name)
			fi, err := os.Lstat(target)
			if errors.Is(err, os.ErrNotExist) {
				continue
			} else if err != nil {
				return fmt.Errorf("hide %s: %w", target, err)
			}
			if fi.IsDir() != (group.how == hideDir) {
				continue
			}
			if err := apply(target, group.how); err != nil {
				return err
			}
		}
	}
	for tid := 2; tid <= last; tid++ {
		target := filepath.Join(proc, strconv.Itoa(tid))
		if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := apply(target, hideDir); err != nil {
			return err
		}
	}
	return nil
}

// System calls and values the shield filter names (x86_64).
const (
	auditArchX86_64 = 0xc000003e
	fioSetOwn       = 0x8901
	siocSPgrp       = 0x8902
)

// shieldProgram is the filter that keeps user code's signals, pidfds,
// SIGIO owners and limit changes off threads 1..last (see the top of this
// file). It is stacked on the sandbox's filter, not part of it: the
// namespaces level needs none, the kernel shields its init.
func shieldProgram(last uint32) []unix.SockFilter {
	var a bpfAsm
	drop := a.label() // signals: "delivered", as Linux's to a pid namespace's init
	refuse := a.label()
	allow := a.label()
	a.load(offArch)
	a.jumpUnless(auditArchX86_64, allow)
	a.load(offNr)
	// A task named by argument arg in 1..last goes to action.
	named := func(nr uint32, arg int, action int) {
		next := a.label()
		a.jumpUnless(nr, next)
		a.load(offArg(arg))
		a.jumpAbove(last, next)
		a.jumpAtLeast(1, action, next)
		a.place(next)
		a.load(offNr)
	}
	named(unix.SYS_KILL, 0, drop)
	named(unix.SYS_TKILL, 0, drop)
	named(unix.SYS_TGKILL, 1, drop)
	named(unix.SYS_RT_SIGQUEUEINFO, 0, drop)
	named(unix.SYS_RT_TGSIGQUEUEINFO, 1, drop)
	named(unix.SYS_PIDFD_OPEN, 0, refuse)
	named(unix.SYS_SETPGID, 1, refuse) // the reaper's group is 1
	// prlimit64(pid, resource, new, old): reading is allowed.
	{
		next := a.label()
		a.jumpUnless(unix.SYS_PRLIMIT64, next)
		a.load(offArg(2))
		isSet := a.label()
		a.jumpUnless(0, isSet)
		a.load(offArg(2) + 4)
		a.jumpUnless(0, isSet)
		a.jump(next)
		a.place(isSet)
		a.load(offArg(0))
		a.jumpAbove(last, next)
		a.jumpAtLeast(1, refuse, next)
		a.place(next)
		a.load(offNr)
	}
	// fcntl(fd, F_SETOWN, pid or -pgid); F_SETOWN_EX's owner is behind a
	// pointer, as is the ioctls'.
	{
		next := a.label()
		a.jumpUnless(unix.SYS_FCNTL, next)
		a.load(offArg(1))
		a.jumpIf(unix.F_SETOWN_EX, refuse)
		a.jumpUnless(unix.F_SETOWN, next)
		a.load(offArg(2))
		negative := a.label()
		a.jumpAbove(last, negative)
		a.jumpAtLeast(1, refuse, next)
		a.place(negative)
		a.jumpAtLeast(uint32(-int32(last)), refuse, next)
		a.place(next)
		a.load(offNr)
	}
	{
		next := a.label()
		a.jumpUnless(unix.SYS_IOCTL, next)
		a.load(offArg(1))
		a.jumpIf(fioSetOwn, refuse)
		a.jumpIf(siocSPgrp, refuse)
		a.place(next)
	}
	a.jump(allow)
	a.place(drop)
	a.ret(unix.SECCOMP_RET_ERRNO | 0)
	a.place(refuse)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.place(allow)
	a.ret(unix.SECCOMP_RET_ALLOW)
	return a.assemble()
}

// shieldReaper makes the reaper's threads, hides them in /proc (under
// root) and returns the filter that keeps user code off them, for
// installing once the reaper has locked down. It needs CAP_SYS_ADMIN.
func shieldReaper(root string) ([]unix.SockFilter, error) {
	prewarmThreads()
	last, err := lastThread()
	if err != nil {
		return nil, err
	}
	if err := hideInitProc(root, last); err != nil {
		return nil, err
	}
	return shieldProgram(uint32(last)), nil
}

// installShield stacks prog on the reaper (and so on everything it starts).
func installShield(prog []unix.SockFilter) error {
	if err := bpfload.Install(prog); err != nil {
		return fmt.Errorf("install the reaper's shield: %w", err)
	}
	return nil
}
