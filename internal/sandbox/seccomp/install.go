//go:build linux && amd64

package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets no_new_privs and loads the sandbox filter into every thread of
// the calling process (SECCOMP_FILTER_FLAG_TSYNC). After it returns, every
// existing thread, every thread the Go runtime creates later and every child
// process is filtered; the filter cannot be removed. The Go runtime keeps
// working: everything it needs (futex, mmap, thread clone, signals, epoll,
// pidfd, wait4, ...) is allowed by Docker's profile. Each call stacks another
// copy of the filter, so call it once.
//
// no_new_privs is required to install a filter without CAP_SYS_ADMIN, and it
// also stops execve of setuid/setcap binaries from gaining privileges.
func Install() error {
	c, err := sandboxFilter()
	if err != nil {
		return err
	}

	// prctl and seccomp act on the calling thread; TSYNC copies both the
	// filter and no_new_privs from it to the others. Without the lock the
	// goroutine could move between the two calls, and the filter would be
	// installed from a thread that lacks no_new_privs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(c.program)), Filter: &c.program[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP,
		unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(&prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: load filter: %w", errno)
	}
	// With TSYNC the kernel reports a thread it could not synchronise (one
	// already under a diverging filter) by returning its TID, not an errno;
	// nothing was installed then.
	if tid != 0 {
		return fmt.Errorf("seccomp: load filter: thread %d could not be synchronized", tid)
	}
	return nil
}
