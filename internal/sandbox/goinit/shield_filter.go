package goinit

import "golang.org/x/sys/unix"

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
