//go:build linux && amd64

package seccomp

import (
	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls are refused with EPERM whatever Docker's profile says. Inside
// its own user namespace sandboxed code holds capabilities, and a container
// runtime would let it use some of these (Docker allows ptrace,
// name_to_handle_at, listmount and statmount to every container); a sandbox
// that only runs a snippet of code has no business with any of them, and each
// is kernel attack surface. Most are already denied by Docker's profile under
// DefaultCapabilities; listing them again makes the guarantee independent of
// the profile. Every name must exist in the x86_64 table (a test checks).
var deniedSyscalls = []string{
	// Mounting and changing the root: the engine prepares the mount
	// namespace; the sandbox must not rearrange it, including through the new
	// mount API (fsopen & co.) or inspect it through listmount/statmount.
	"mount", "umount2", "pivot_root",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
	"open_tree", "open_tree_attr", "mount_setattr",
	"listmount", "statmount",

	// Namespaces: no new ones, no joining others. clone/clone3 are handled by
	// namespaceCloneRules because they are also how threads and processes
	// are made.
	"unshare", "setns",

	// Kernel keyrings are not namespaced.
	"keyctl", "add_key", "request_key",

	// Large, frequently exploited kernel interfaces.
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",

	// Debugging other processes; also the historical way around seccomp.
	// (process_vm_readv/writev stay as Docker has them: they need ptrace
	// access, which CAP_SYS_PTRACE's absence and init's non-dumpable flag
	// limit to the program's own processes.)
	"ptrace",

	// Kernel modules and replacing the kernel.
	"init_module", "finit_module", "delete_module",
	"kexec_load", "kexec_file_load",

	// File handles bypass path-based access checks.
	"open_by_handle_at", "name_to_handle_at",

	// Host-wide administration.
	"lookup_dcookie", "acct", "swapon", "swapoff", "reboot", "syslog",
	"quotactl", "quotactl_fd",
}

// unavailableSyscalls are refused with ENOSYS, as a kernel built without them
// would refuse them, so that programs take the fallback they already have for
// such kernels. Every name must exist in the x86_64 table (a test checks).
var unavailableSyscalls = []string{
	// Kernel AIO: io_setup reserves its events in one table the whole host
	// shares (fs.aio-max-nr), which no per-process, per-user or cgroup limit
	// bounds: one sandbox took all of it, and every io_setup on the host,
	// root's included, then failed with EAGAIN. libaio's users (databases,
	// mostly) fall back to threads on ENOSYS; glibc's POSIX AIO never uses
	// it. io_submit and the rest need a context only io_setup makes.
	"io_setup",
	// Secret memory is taken out of the kernel's direct map (fragmenting it
	// for the whole host) and hidden from the kernel itself; a snippet of
	// code has no secret to keep from the machine it runs on.
	"memfd_secret",
}

// namespaceCloneFlags are the CLONE_NEW* bits clone(2) accepts in its flags
// argument. CLONE_NEWTIME is not among them: it is 0x80, inside the exit-signal
// byte of clone(2)'s flags, and only unshare(2)/clone3(2) can request it.
const namespaceCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// extraRules are the denials added on top of the profile, in the order they
// are emitted.
//
// clone(2) with any CLONE_NEW* flag gets EPERM: Docker encodes the same thing
// as an allow rule (MASKED_EQ flags&mask == 0), which this restates as an
// explicit deny so it holds regardless of the profile. clone3(2) cannot be
// filtered on its flags (they sit in a struct behind a pointer), so it gets
// ENOSYS, as in Docker's profile: glibc and the Go runtime then fall back to
// clone(2), where the flags are visible. unavailableSyscalls get ENOSYS too.
func extraRules() []rule {
	return []rule{
		{action: errnoAction(unix.EPERM), names: deniedSyscalls, args: matchAlways},
		{action: errnoAction(unix.ENOSYS), names: append([]string{"clone3"}, unavailableSyscalls...), args: matchAlways},
		{
			action: errnoAction(unix.EPERM),
			names:  []string{"clone"},
			args: argMatch{sets: []seccompbpf.ArgumentConditions{{{
				Argument:  cloneFlagsArg,
				Operation: seccompbpf.BitsSet,
				Value:     namespaceCloneFlags,
			}}}},
		},
		{
			action: errnoAction(unix.EPERM),
			names:  []string{"prlimit64"},
			args:   argMatch{sets: []seccompbpf.ArgumentConditions{setsOthersLimits}},
		},
	}
}

// setsOthersLimits matches prlimit64(2) setting (a new limit is given) the
// limits of a process other than the caller (pid 0 is the caller). Sandbox
// init runs as the same uid as user code, which the kernel lets change its
// limits: with no descriptor left it could not read return files, with a
// tiny address space or CPU time it would die. Reading any process's limits,
// and setting one's own (setrlimit is prlimit64 with pid 0), stay allowed.
// The pid is compared on all 64 bits: a value the kernel would cut down to
// 0 is refused, never let through.
var setsOthersLimits = seccompbpf.ArgumentConditions{
	{Argument: 0, Operation: seccompbpf.NotEqual, Value: 0},
	{Argument: 2, Operation: seccompbpf.NotEqual, Value: 0},
}
