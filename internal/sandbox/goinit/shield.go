package goinit

import (
	"errors"
	"fmt"
	"os"
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
