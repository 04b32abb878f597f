//go:build linux && amd64

package seccomp

import (
	"fmt"
	"log/slog"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	dockerprofile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// maxErrno is the largest errno a seccomp filter can return; the kernel
// clamps larger SECCOMP_RET_DATA values to it.
const maxErrno = 4095

// errnoAction returns SECCOMP_RET_ERRNO with errno in the data bits. Passing
// it as a group action makes go-seccomp-bpf emit the value unchanged (it only
// substitutes EPERM for a bare ActionErrno).
func errnoAction(errno unix.Errno) seccompbpf.Action {
	return seccompbpf.ActionErrno | seccompbpf.Action(errno)
}

// translateAction maps a rule's OCI action to a go-seccomp-bpf return value.
// An errno rule without errnoRet returns EPERM, as runc does (the profile's
// defaultErrnoRet only applies to the default action).
//
// SCMP_ACT_TRACE and SCMP_ACT_NOTIFY become plain errno denials: nothing
// traces or supervises a sandbox (ptrace is denied and no notify listener is
// ever created), so a deny is what those rules amount to, and it can never be
// turned into an allow by a tracer. SCMP_ACT_ERRNO with errno 0 (a faked
// success) becomes EPERM: refusing is never looser than pretending.
func translateAction(rule specs.LinuxSyscall) (seccompbpf.Action, error) {
	errno := unix.EPERM
	if rule.ErrnoRet != nil {
		if *rule.ErrnoRet > maxErrno {
			return 0, fmt.Errorf("errnoRet %d out of range", *rule.ErrnoRet)
		}
		errno = unix.Errno(*rule.ErrnoRet)
	}
	if errno == 0 {
		errno = unix.EPERM
	}
	switch rule.Action {
	case specs.ActAllow:
		return seccompbpf.ActionAllow, nil
	case specs.ActLog:
		return seccompbpf.ActionLog, nil
	case specs.ActErrno, specs.ActTrace, specs.ActNotify:
		return errnoAction(errno), nil
	}
	if a, ok := killOrTrap(rule.Action); ok {
		return a, nil
	}
	return 0, fmt.Errorf("unknown seccomp action %q", rule.Action)
}

// killOrTrap translates the actions that kill the caller or send it
// SIGSYS, alike for a rule and the profile's default (ok false for any
// other action).
func killOrTrap(a specs.LinuxSeccompAction) (seccompbpf.Action, bool) {
	switch a {
	case specs.ActKill, specs.ActKillThread:
		// libseccomp's SCMP_ACT_KILL is SECCOMP_RET_KILL_THREAD.
		return seccompbpf.ActionKillThread, true
	case specs.ActKillProcess:
		return seccompbpf.ActionKillProcess, true
	case specs.ActTrap:
		return seccompbpf.ActionTrap, true
	}
	return 0, false
}

// defaultAction translates the profile's default action. It must deny: the
// architecture check sends every non-native syscall to the default action, so
// an allow-by-default profile would let the i386 ABI through, and unknown
// syscall names are skipped on the premise that what is not allowed is denied.
//
// go-seccomp-bpf only accepts a bare ActionErrno as default and turns it into
// EPERM, so a different default errno cannot be expressed; EPERM is used
// instead, which still denies.
func defaultAction(prof *dockerprofile.Seccomp) (seccompbpf.Action, error) {
	if prof.DefaultAction == specs.ActErrno {
		if e := prof.DefaultErrnoRet; e != nil && unix.Errno(*e) != unix.EPERM {
			slog.Debug("seccomp: default errno not expressible, using EPERM", "errno", *e)
		}
		return seccompbpf.ActionErrno, nil
	}
	if a, ok := killOrTrap(prof.DefaultAction); ok {
		return a, nil
	}
	return 0, fmt.Errorf("profile default action %q does not deny", prof.DefaultAction)
}

// permits reports whether an action lets the syscall run.
func permits(a seccompbpf.Action) bool {
	return a == seccompbpf.ActionAllow || a == seccompbpf.ActionLog
}

// strictness ranks actions so that rules are emitted strictest first.
// go-seccomp-bpf evaluates groups in order and the first match wins, so with
// every denial ahead of every allowance no allow rule can shadow a deny rule
// for the same syscall, whatever order the profile lists them in.
func strictness(a seccompbpf.Action) int {
	switch a & unix.SECCOMP_RET_ACTION_FULL {
	case seccompbpf.ActionKillProcess:
		return 5
	case seccompbpf.ActionKillThread:
		return 4
	case seccompbpf.ActionTrap:
		return 3
	case seccompbpf.ActionErrno:
		return 2
	case seccompbpf.ActionLog:
		return 1
	default: // ActionAllow
		return 0
	}
}
