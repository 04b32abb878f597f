//go:build linux && amd64

package seccomp

import (
	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp/bpfload"
)

// Install sets no_new_privs and loads the sandbox filter into every thread of
// the calling process (SECCOMP_FILTER_FLAG_TSYNC). After it returns, every
// existing thread, every thread the Go runtime creates later and every child
// process is filtered; the filter cannot be removed. The Go runtime keeps
// working: everything it needs (futex, mmap, thread clone, signals, epoll,
// pidfd, wait4, ...) is allowed by Docker's profile. Each call stacks another
// copy of the filter, so call it once.
//
// Sandboxes do not get their filter this way: the engine compiles it once
// (Program) and each sandbox's init installs that program (bpfload). Install
// is for a process that filters itself, as this package's tests do to prove
// the filter from inside.
//
// no_new_privs is required to install a filter without CAP_SYS_ADMIN, and it
// also stops execve of setuid/setcap binaries from gaining privileges.
func Install() error {
	prog, err := Program()
	if err != nil {
		return err
	}
	return bpfload.Install(prog)
}

// Program returns the compiled sandbox filter in the kernel's format (a
// copy; compiled once per process), for a sandbox's init to install with
// bpfload.Install.
func Program() ([]unix.SockFilter, error) {
	c, err := sandboxFilter()
	if err != nil {
		return nil, err
	}
	return append([]unix.SockFilter(nil), c.program...), nil
}
