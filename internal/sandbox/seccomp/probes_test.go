//go:build linux && amd64

package seccomp

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// probe makes one syscall that the filter must refuse with want. Arguments
// are chosen so that the call has no lasting effect even without the filter
// (bad pointers, bad descriptors, invalid flag combinations, missing paths),
// and mostly so that the kernel itself would give a different error, which
// makes the filter's answer recognisable.
type probe struct {
	name string
	want unix.Errno
	// hostMayAgree marks probes the host kernel may answer with want on
	// its own (modules or kexec disabled, no x32 ABI built in), so an
	// unfiltered run cannot tell them apart from the filter.
	hostMayAgree bool
	call         func(t *testing.T) unix.Errno
}

// sys calls an x86_64 syscall by name.
func sys(name string, args ...uintptr) unix.Errno {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(uintptr(arch.X86_64.SyscallNames[name]), a[0], a[1], a[2], a[3], a[4], a[5])
	return e
}

// cstr returns a NUL-terminated copy of s. Go's heap does not move, so the
// address stays valid while the returned slice is alive; callers keep it
// alive with runtime.KeepAlive.
func cstr(s string) []byte { return append([]byte(s), 0) }

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// badFD is -1 and atFDCWD is AT_FDCWD (-100) as syscall arguments.
const (
	badFD   = ^uintptr(0)
	atFDCWD = ^uintptr(99)
)

// sysWith calls name with the strings' addresses substituted for the
// placeholders strArg(i) in args.
func sysWith(name string, strs []string, args ...uintptr) unix.Errno {
	bufs := make([][]byte, len(strs))
	for i, s := range strs {
		bufs[i] = cstr(s)
	}
	for i, a := range args {
		if a >= strBase && a < strBase+uintptr(len(strs)) {
			args[i] = addr(bufs[a-strBase])
		}
	}
	e := sys(name, args...)
	runtime.KeepAlive(bufs)
	return e
}

// strBase marks placeholder arguments for sysWith (an address nothing maps).
const strBase = uintptr(0x5eccda7a0000)

func simple(name string, want unix.Errno, args ...uintptr) probe {
	return probe{name: name, want: want, call: func(*testing.T) unix.Errno { return sys(name, args...) }}
}

func withStrings(name string, strs []string, args ...uintptr) probe {
	return probe{name: name, want: unix.EPERM, call: func(*testing.T) unix.Errno {
		return sysWith(name, strs, append([]uintptr(nil), args...)...)
	}}
}

// cloneProbe calls clone(2) with a namespace flag plus CLONE_SIGHAND without
// CLONE_VM, a combination the kernel rejects with EINVAL, so the call can
// never create a process even if the filter let it through.
func cloneProbe(flag uintptr) probe {
	return probe{name: "clone", want: unix.EPERM, call: func(*testing.T) unix.Errno {
		_, _, e := unix.RawSyscall6(unix.SYS_CLONE, flag|unix.CLONE_SIGHAND, 0, 0, 0, 0, 0)
		return e
	}}
}

// deniedProbes covers every extra denial and the ways around them.
func deniedProbes() []probe {
	eperm := unix.EPERM
	probes := []probe{
		withStrings("mount", []string{"none", "/", "scratchrun-no-such-fs"}, strBase, strBase+1, strBase+2, 0, 0),
		withStrings("umount2", []string{"/scratchrun-no-such-dir"}, strBase, 0),
		withStrings("pivot_root", []string{"/scratchrun-a", "/scratchrun-b"}, strBase, strBase+1),
		simple("unshare", eperm, unix.CLONE_NEWUSER), // EINVAL unfiltered: the process is multithreaded
		simple("unshare", eperm, unix.CLONE_NEWNS|unix.CLONE_THREAD),
		{name: "setns", want: eperm, call: func(t *testing.T) unix.Errno {
			f, err := os.Open("/proc/self/ns/uts")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			return sys("setns", f.Fd(), unix.CLONE_NEWUTS)
		}},
		simple("keyctl", eperm, 0xdead),
		simple("add_key", eperm, 0, 0, 0, 0, 0),
		simple("request_key", eperm, 0, 0, 0, 0),
		simple("bpf", eperm, unix.BPF_PROG_LOAD, 0, 0),
		simple("perf_event_open", eperm, 0, 0, badFD, badFD, 0),
		simple("userfaultfd", eperm, 0xdead),
		simple("io_uring_setup", eperm, 1, 0),
		simple("io_uring_enter", eperm, badFD, 0, 0, 0, 0, 0),
		simple("io_uring_register", eperm, badFD, 0, 0, 0),
		{name: "ptrace", want: eperm, call: func(t *testing.T) unix.Errno {
			cmd := exec.Command("/bin/sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			runtime.LockOSThread() // a successful attach would bind the tracee to this thread
			defer runtime.UnlockOSThread()
			e := sys("ptrace", unix.PTRACE_ATTACH, uintptr(cmd.Process.Pid))
			if e == 0 {
				_ = sys("ptrace", unix.PTRACE_DETACH, uintptr(cmd.Process.Pid))
			}
			return e
		}},
		{name: "init_module", want: eperm, hostMayAgree: true, call: func(*testing.T) unix.Errno { return sys("init_module", 0, 0, 0) }},
		{name: "finit_module", want: eperm, hostMayAgree: true, call: func(*testing.T) unix.Errno { return sys("finit_module", badFD, 0, 0) }},
		{name: "delete_module", want: eperm, hostMayAgree: true, call: func(*testing.T) unix.Errno {
			return sysWith("delete_module", []string{"scratchrun_no_such_module"}, strBase, unix.O_NONBLOCK)
		}},
		{name: "kexec_load", want: eperm, hostMayAgree: true, call: func(*testing.T) unix.Errno { return sys("kexec_load", 0, 0, 0, 0xdead0000) }},
		{name: "kexec_file_load", want: eperm, hostMayAgree: true, call: func(*testing.T) unix.Errno {
			return sys("kexec_file_load", badFD, badFD, 0, 0, 0xdead0000)
		}},
		simple("open_by_handle_at", eperm, badFD, 0, 0),
		withStrings("name_to_handle_at", []string{"/"}, atFDCWD, strBase, 0, 0, 0),
		simple("fsopen", eperm, 0, 0),
		simple("fsconfig", eperm, badFD, 0, 0, 0, 0),
		simple("fsmount", eperm, badFD, 0, 0),
		simple("fspick", eperm, badFD, 0, 0),
		simple("move_mount", eperm, badFD, 0, badFD, 0, 0),
		simple("open_tree", eperm, badFD, 0, 0),
		simple("open_tree_attr", eperm, badFD, 0, 0, 0, 0),
		simple("mount_setattr", eperm, badFD, 0, 0, 0, 0),
		simple("listmount", eperm, 0, 0, 0, 0),
		simple("statmount", eperm, 0, 0, 0, 0),
		simple("lookup_dcookie", eperm, 0, 0, 0), // ENOSYS unfiltered since Linux 6.10
		withStrings("acct", []string{"/scratchrun-no-such-file"}, strBase),
		simple("swapon", eperm, 0, 0),
		simple("swapoff", eperm, 0),
		simple("reboot", eperm, 0, 0, 0, 0), // bad magic: EINVAL unfiltered
		simple("syslog", eperm, 10, 0, 0),   // SYSLOG_ACTION_SIZE_BUFFER, read-only
		simple("quotactl", eperm, 0, 0, 0, 0),
		simple("quotactl_fd", eperm, badFD, 0, 0, 0),
		simple("clone3", unix.ENOSYS, 0, 0), // EINVAL unfiltered (size 0)
		// Setting another process's limits (a bad pointer: EFAULT
		// unfiltered, and pid 1 is not ours to change anyway).
		simple("prlimit64", eperm, 1, unix.RLIMIT_NOFILE, 1, 0),
		// Unfiltered, io_setup with a null context pointer fails with EFAULT
		// and memfd_secret with unknown flags with EINVAL (a kernel without
		// secret memory says ENOSYS itself).
		simple("io_setup", unix.ENOSYS, 0, 0),
		{name: "memfd_secret", want: unix.ENOSYS, hostMayAgree: true, call: func(*testing.T) unix.Errno { return sys("memfd_secret", 0xdead) }},
		simple("socket", eperm, unix.AF_VSOCK, unix.SOCK_STREAM, 0),
		{name: "x32 getpid", want: unix.ENOSYS, hostMayAgree: true, call: func(*testing.T) unix.Errno {
			_, _, e := unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
			return e
		}},
		{name: "x32 mount", want: unix.ENOSYS, hostMayAgree: true, call: func(*testing.T) unix.Errno {
			_, _, e := unix.RawSyscall6(0x40000000|unix.SYS_MOUNT, 0, 0, 0, 0, 0, 0)
			return e
		}},
	}
	for _, f := range []uintptr{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		probes = append(probes, cloneProbe(f))
	}
	return probes
}

// underSeccomp reports whether this process already runs under a seccomp
// filter (e.g. inside a container), in which case unfiltered comparisons
// mean nothing.
func underSeccomp() bool {
	mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	return err != nil || mode != 0
}

// TestProbesAreMeaningful runs the probes without the filter: they must not
// already fail with the errno the filter is expected to return, or the
// filtered run would prove nothing.
func TestProbesAreMeaningful(t *testing.T) {
	if testing.Short() { // the fast tier: see docs/design.md, "Test tiers"
		t.Skip("skipped under -short (the fast tier): probes syscalls that answer differently without root")
	}
	if inChild() {
		t.Skip("runs unfiltered only")
	}
	if underSeccomp() {
		t.Skip("test process already runs under seccomp")
	}
	for _, p := range deniedProbes() {
		got := p.call(t)
		switch {
		case got != p.want:
			t.Logf("%-18s unfiltered: %v", p.name, errnoName(got))
		case p.hostMayAgree:
			t.Logf("%-18s unfiltered: %v (host kernel agrees)", p.name, errnoName(got))
		default:
			t.Errorf("%s: unfiltered already returns %v", p.name, got)
		}
	}
}

func errnoName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return unix.ErrnoName(e)
}
