//go:build linux && amd64

package seccomp

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	dockerprofile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// sandboxSimulator returns the filter Install loads, ready to run.
func sandboxSimulator(t *testing.T) (*compiled, simulator) {
	t.Helper()
	c, err := sandboxFilter()
	if err != nil {
		t.Fatal(err)
	}
	return c, programSimulator(t, c.program)
}

// sandboxRules returns the rules of Docker's default profile that apply to
// a sandbox here (the running kernel, the sandboxes' capabilities).
func sandboxRules(t *testing.T) []specs.LinuxSyscall {
	t.Helper()
	env, err := sandboxEnv()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := applicableRules(dockerprofile.DefaultProfile(), env)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// nr returns the x86_64 number of a syscall name.
func nr(t testing.TB, name string) int {
	t.Helper()
	n, ok := nativeSyscalls.SyscallNames[name]
	if !ok {
		t.Fatalf("no x86_64 syscall %q", name)
	}
	return n
}

// TestPolicyAllowsCommonSyscalls: ordinary programs and the Go runtime keep
// working under the filter.
func TestPolicyAllowsCommonSyscalls(t *testing.T) {
	_, sim := sandboxSimulator(t)
	const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	cases := []struct {
		name string
		args []uint64
	}{
		{"read", nil}, {"write", nil}, {"openat", nil}, {"openat2", nil}, {"close", nil},
		{"newfstatat", nil}, {"statx", nil}, {"lseek", nil}, {"getdents64", nil}, {"readlinkat", nil},
		{"mkdirat", nil}, {"unlinkat", nil}, {"renameat2", nil}, {"fcntl", nil}, {"ioctl", nil},
		{"mmap", nil}, {"munmap", nil}, {"mprotect", nil}, {"madvise", nil}, {"brk", nil},
		{"execve", nil}, {"execveat", nil}, {"exit", nil}, {"exit_group", nil},
		{"clone", []uint64{sigchld}},
		{"clone", []uint64{threadFlags}},
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | sigchld}},
		{"fork", nil}, {"vfork", nil}, {"wait4", nil}, {"waitid", nil}, {"kill", nil}, {"tgkill", nil},
		{"pidfd_open", nil}, {"pidfd_send_signal", nil},
		{"futex", nil}, {"rt_sigaction", nil}, {"rt_sigprocmask", nil}, {"rt_sigreturn", nil}, {"sigaltstack", nil},
		{"epoll_create1", nil}, {"epoll_ctl", nil}, {"epoll_pwait", nil}, {"epoll_wait", nil}, {"eventfd2", nil},
		{"pipe2", nil}, {"dup3", nil}, {"poll", nil}, {"ppoll", nil},
		{"socket", []uint64{unix.AF_INET, unix.SOCK_STREAM}},
		{"socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM}},
		{"socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM}},
		{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW}},
		{"connect", nil}, {"bind", nil}, {"listen", nil}, {"accept4", nil}, {"sendmsg", nil}, {"recvfrom", nil},
		{"setsockopt", nil}, {"getsockname", nil},
		{"getpid", nil}, {"gettid", nil}, {"getuid", nil}, {"setuid", nil}, {"setgid", nil}, {"capget", nil},
		{"getrandom", nil}, {"clock_gettime", nil}, {"nanosleep", nil}, {"clock_nanosleep", nil},
		{"sched_yield", nil}, {"sched_getaffinity", nil}, {"set_tid_address", nil}, {"set_robust_list", nil},
		{"rseq", nil}, {"prctl", nil}, {"arch_prctl", nil}, {"prlimit64", nil}, {"uname", nil},
		{"seccomp", nil}, {"memfd_create", nil}, {"chroot", nil},
		{"personality", []uint64{0}}, {"personality", []uint64{0xffffffff}},
	}
	for _, c := range cases {
		if v := sim.run(t, native(nr(t, c.name), c.args...)); v != retAllow {
			t.Errorf("%s%#x: verdict %#x, want allow", c.name, c.args, v)
		}
	}
}

// TestPolicyDenies checks the extra denials and a few of Docker's own.
func TestPolicyDenies(t *testing.T) {
	_, sim := sandboxSimulator(t)
	argSets := [][]uint64{nil, {1, 2, 3, 4, 5, 6}, {^uint64(0), ^uint64(0)}}
	for _, name := range deniedSyscalls {
		for _, args := range argSets {
			if v := sim.run(t, native(nr(t, name), args...)); v != retEPERM {
				t.Errorf("%s%#x: verdict %#x, want EPERM", name, args, v)
			}
		}
	}
	nsFlags := []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET}
	for _, f := range nsFlags {
		for _, extra := range []uint64{0, sigchld, unix.CLONE_VM | unix.CLONE_VFORK, 1 << 40} {
			if v := sim.run(t, native(unix.SYS_CLONE, f|extra)); v != retEPERM {
				t.Errorf("clone(%#x): verdict %#x, want EPERM", f|extra, v)
			}
		}
	}
	// prlimit64 may read any process's limits and set its own, not set
	// another's (pid 1 << 32 would be pid 0 to the kernel: refused too).
	for _, c := range []struct {
		args []uint64
		want uint32
	}{
		{[]uint64{1, unix.RLIMIT_NOFILE, 0x1000, 0}, retEPERM},
		{[]uint64{1 << 32, unix.RLIMIT_NOFILE, 0x1000, 0}, retEPERM},
		{[]uint64{0, unix.RLIMIT_NOFILE, 0x1000, 0}, retAllow},
		{[]uint64{1, unix.RLIMIT_NOFILE, 0, 0x1000}, retAllow},
	} {
		if v := sim.run(t, native(unix.SYS_PRLIMIT64, c.args...)); v != c.want {
			t.Errorf("prlimit64%#x: verdict %#x, want %#x", c.args, v, c.want)
		}
	}
	for _, name := range append([]string{"clone3"}, unavailableSyscalls...) {
		for _, args := range argSets {
			if v := sim.run(t, native(nr(t, name), args...)); v != retNOSYS {
				t.Errorf("%s%#x: verdict %#x, want ENOSYS", name, args, v)
			}
		}
	}
	docker := []struct {
		name string
		args []uint64
	}{
		{"socket", []uint64{unix.AF_VSOCK}},
		{"socket", []uint64{unix.AF_ALG}},
		{"socket", []uint64{1<<32 | unix.AF_INET}}, // upper bits set: libseccomp compares 64 bits too
		{"personality", []uint64{0x0400000}},       // READ_IMPLIES_EXEC
		{"sethostname", nil}, {"setdomainname", nil}, {"fanotify_init", nil}, {"kcmp", nil},
		{"pidfd_getfd", nil}, {"iopl", nil}, {"ioperm", nil}, {"settimeofday", nil}, {"clock_settime", nil},
		{"vhangup", nil}, {"mbind", nil}, {"set_mempolicy", nil},
	}
	for _, c := range docker {
		if v := sim.run(t, native(nr(t, c.name), c.args...)); v != retEPERM {
			t.Errorf("%s%#x: verdict %#x, want EPERM", c.name, c.args, v)
		}
	}
	for _, n := range []uint32{470, 511, 1000, 0x3fffffff} {
		if v := sim.run(t, call{arch: unix.AUDIT_ARCH_X86_64, nr: n}); v != retEPERM {
			t.Errorf("syscall %d: verdict %#x, want EPERM", n, v)
		}
	}
}

// TestPolicyArchCheck: the program starts by checking the architecture, and
// neither the i386 ABI (int $0x80) nor x32 nor any other audit arch reaches an
// allow, whatever the syscall number and arguments.
func TestPolicyArchCheck(t *testing.T) {
	c, sim := sandboxSimulator(t)
	if !slices.Equal(c.subArch, []string{string(specs.ArchX86), string(specs.ArchX32)}) {
		t.Errorf("Docker's archMap adds %v for x86_64; arch.go assumes x86 and x32", c.subArch)
	}
	if got, want := c.insts[0], (bpf.LoadAbsolute{Off: 4, Size: 4}); got != want {
		t.Fatalf("instruction 0 = %v, want %v (load seccomp_data.arch)", got, want)
	}
	if jump, ok := c.insts[1].(bpf.JumpIf); !ok || jump.Val != unix.AUDIT_ARCH_X86_64 {
		t.Fatalf("instruction 1 = %v, want a comparison with AUDIT_ARCH_X86_64", c.insts[1])
	}
	// Where the foreign-architecture branch leads (through the conditional
	// tail's own architecture check) is established by simulation: every
	// number under every other architecture must be denied.
	rng := rand.New(rand.NewPCG(1, 2))
	arches := []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64, unix.AUDIT_ARCH_ARM, 0, ^uint32(0)}
	for _, a := range arches {
		for n := range uint32(1024) {
			cl := call{arch: a, nr: n}
			cl.args[0] = rng.Uint64()
			if v := sim.run(t, cl); v != retEPERM {
				t.Fatalf("arch %#x syscall %d: verdict %#x, want EPERM", a, n, v)
			}
		}
	}
	// x32: the x86_64 arch value with __X32_SYSCALL_BIT in the number.
	for n := range uint32(1024) {
		for _, base := range []uint32{0x40000000, 0x80000000, 0xc0000000} {
			if v := sim.run(t, call{arch: unix.AUDIT_ARCH_X86_64, nr: base | n}); v != retNOSYS {
				t.Fatalf("syscall %#x: verdict %#x, want ENOSYS", base|n, v)
			}
		}
	}
}

// dockerVerdict is the reference: what runc and libseccomp do with Docker's
// evaluated rules on x86_64. A deny rule that matches wins over allow rules;
// otherwise any matching allow rule allows; otherwise the default (EPERM).
func dockerVerdict(rules []specs.LinuxSyscall, name string, args [maxArgs]uint64) uint32 {
	holds := func(r specs.LinuxSyscall) bool {
		if !slices.Contains(r.Names, name) {
			return false
		}
		for _, a := range r.Args {
			if !libseccompHolds(a, args[a.Index]) {
				return false
			}
		}
		return true
	}
	for _, r := range rules {
		if r.Action != specs.ActAllow && holds(r) {
			errno := unix.EPERM
			if r.ErrnoRet != nil {
				errno = unix.Errno(*r.ErrnoRet)
			}
			return unix.SECCOMP_RET_ERRNO | uint32(errno)
		}
	}
	for _, r := range rules {
		if r.Action == specs.ActAllow && holds(r) {
			return retAllow
		}
	}
	return retEPERM
}

// extraVerdict is the reference for the denials added on top of Docker's
// profile; ok is false when they do not apply.
func extraVerdict(name string, args [maxArgs]uint64) (v uint32, ok bool) {
	switch {
	case slices.Contains(deniedSyscalls, name):
		return retEPERM, true
	case name == "clone3", slices.Contains(unavailableSyscalls, name):
		return retNOSYS, true
	case name == "clone" && args[cloneFlagsArg]&namespaceCloneFlags != 0:
		return retEPERM, true
	case name == "prlimit64" && args[0] != 0 && args[2] != 0:
		return retEPERM, true
	}
	return 0, false
}

// argSamples are argument vectors that hit every comparison in Docker's
// profile from both sides, plus random ones.
func argSamples() [][maxArgs]uint64 {
	var out [][maxArgs]uint64
	add := func(a0, a1 uint64) { out = append(out, [maxArgs]uint64{a0, a1}) }
	values := slices.Clone(interesting)
	for v := range uint64(64) {
		values = append(values, v, 1<<v)
	}
	values = append(values, 0x8, 0x20000, 0x20008, 1<<32|2, sigchld|unix.CLONE_NEWNS)
	for _, v := range values {
		add(v, 0)
		add(0, v)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 64 {
		var a [maxArgs]uint64
		for i := range a {
			a[i] = rng.Uint64()
		}
		out = append(out, a)
	}
	return out
}

// TestPolicyIsDockerPlusDenials is the "never loosens" check: for every x86_64
// syscall and many argument vectors the filter's verdict is exactly Docker's
// (as libseccomp would evaluate the same rules), except where an extra
// denial applies, and then it denies.
func TestPolicyIsDockerPlusDenials(t *testing.T) {
	_, sim := sandboxSimulator(t)
	rules := sandboxRules(t)
	for _, r := range rules {
		if repeatsIndex(r.Args) {
			t.Fatalf("rule %v compares one argument twice; dockerVerdict's AND reading would not be runc's", r.Names)
		}
	}
	samples := argSamples()
	loosened, tightened := 0, 0
	for n, name := range nativeSyscalls.SyscallNumbers {
		for _, args := range samples {
			want, extra := extraVerdict(name, args)
			docker := dockerVerdict(rules, name, args)
			if !extra {
				want = docker
			}
			got := sim.run(t, call{arch: unix.AUDIT_ARCH_X86_64, nr: uint32(n), args: args})
			if got != want {
				t.Errorf("%s%#x: verdict %#x, want %#x", name, args, got, want)
			}
			if lets(got) && !lets(docker) {
				loosened++
			}
			if lets(docker) && !lets(got) {
				tightened++
			}
		}
	}
	if loosened != 0 {
		t.Errorf("%d calls allowed that Docker denies", loosened)
	}
	t.Logf("%d syscalls x %d argument vectors; %d calls Docker allows are denied by the extra rules",
		len(nativeSyscalls.SyscallNumbers), len(samples), tightened)
}

// TestUnknownNamesOnlyInAllowRules: names missing from the x86_64 table are
// skipped, which is only harmless because they appear in allow rules alone (a
// skipped deny rule would fall through to the default, still a denial, but
// with a different errno).
func TestUnknownNamesOnlyInAllowRules(t *testing.T) {
	c, _ := sandboxSimulator(t)
	rules := sandboxRules(t)
	for _, r := range rules {
		if r.Action == specs.ActAllow {
			continue
		}
		for _, name := range r.Names {
			if slices.Contains(c.unknown, name) {
				t.Errorf("%s rule names %q, unknown on x86_64", r.Action, name)
			}
		}
	}
	t.Logf("skipped (not x86_64 syscalls): %v", c.unknown)
}

// TestDeniedSyscallsExist: every extra denial names a real x86_64 syscall,
// so none is silently skipped.
func TestDeniedSyscallsExist(t *testing.T) {
	for _, name := range append(slices.Concat(deniedSyscalls, unavailableSyscalls), "clone", "clone3") {
		nr(t, name)
	}
}

// TestPolicyReturnsCopy: Policy hands out copies that assemble to exactly
// the program Install loads, and changing one does not change the filter.
func TestPolicyReturnsCopy(t *testing.T) {
	c, _ := sandboxSimulator(t)
	p, err := Policy()
	if err != nil {
		t.Fatal(err)
	}
	insts, err := assemble(*p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(insts, c.insts) {
		t.Fatal("Policy() does not assemble to the installed program")
	}
	p.DefaultAction = seccompbpf.ActionAllow
	p.Syscalls[0].Names[0] = "getpid"
	p.Syscalls = append(p.Syscalls[:1], seccompbpf.SyscallGroup{Action: seccompbpf.ActionAllow, Names: []string{"mount"}})
	again, err := Policy()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*again, *clonePolicy(c.policy)) || again.DefaultAction != seccompbpf.ActionErrno {
		t.Fatal("modifying a returned policy changed the cached one")
	}
	t.Logf("filter: %d BPF instructions, %d groups", len(c.program), len(c.policy.Syscalls))
}

// TestCompileOtherEnvironments: the includes/excludes evaluation reaches the
// filter, and the extra denials hold even where Docker would allow.
func TestCompileOtherEnvironments(t *testing.T) {
	build := func(caps []string, kernel dockerprofile.KernelVersion) simulator {
		c, err := compile(dockerprofile.DefaultProfile(), profileEnv{arch: profileArch, caps: caps, kernel: kernel})
		if err != nil {
			t.Fatal(err)
		}
		return programSimulator(t, c.program)
	}
	modern := dockerprofile.KernelVersion{Kernel: 6, Major: 1}

	// process_vm_readv needs kernel >= 4.8 (or CAP_SYS_PTRACE).
	old := build(DefaultCapabilityNames, dockerprofile.KernelVersion{Kernel: 4, Major: 7})
	cur := build(DefaultCapabilityNames, modern)
	if v := old.run(t, native(unix.SYS_PROCESS_VM_READV)); v != retEPERM {
		t.Errorf("process_vm_readv on 4.7: %#x, want EPERM", v)
	}
	if v := cur.run(t, native(unix.SYS_PROCESS_VM_READV)); v != retAllow {
		t.Errorf("process_vm_readv on 6.1: %#x, want allow", v)
	}

	// chroot needs CAP_SYS_CHROOT.
	noChroot := slices.DeleteFunc(slices.Clone(DefaultCapabilityNames), func(s string) bool { return s == "CAP_SYS_CHROOT" })
	if v := build(noChroot, modern).run(t, native(unix.SYS_CHROOT)); v != retEPERM {
		t.Errorf("chroot without CAP_SYS_CHROOT: %#x, want EPERM", v)
	}

	// With CAP_SYS_ADMIN Docker allows mount, unshare, clone with namespace
	// flags and a real clone3, and with CAP_SYS_PTRACE ptrace; the extra
	// rules still deny them. sethostname shows the capability took effect.
	admin := build(append(slices.Clone(DefaultCapabilityNames), "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_BPF"), modern)
	if v := admin.run(t, native(unix.SYS_SETHOSTNAME)); v != retAllow {
		t.Errorf("sethostname with CAP_SYS_ADMIN: %#x, want allow", v)
	}
	for _, name := range []string{"mount", "unshare", "setns", "ptrace", "bpf", "perf_event_open"} {
		if v := admin.run(t, native(nr(t, name))); v != retEPERM {
			t.Errorf("%s with CAP_SYS_ADMIN: %#x, want EPERM", name, v)
		}
	}
	if v := admin.run(t, native(unix.SYS_CLONE, unix.CLONE_NEWUSER)); v != retEPERM {
		t.Errorf("clone(CLONE_NEWUSER) with CAP_SYS_ADMIN: %#x, want EPERM", v)
	}
	if v := admin.run(t, native(unix.SYS_CLONE, sigchld)); v != retAllow {
		t.Errorf("clone(SIGCHLD) with CAP_SYS_ADMIN: %#x, want allow", v)
	}
	if v := admin.run(t, native(unix.SYS_CLONE3)); v != retNOSYS {
		t.Errorf("clone3 with CAP_SYS_ADMIN: %#x, want ENOSYS", v)
	}
}

// TestDefaultActionMustDeny: a profile that allows by default is refused,
// because the architecture check relies on the default denying.
func TestDefaultActionMustDeny(t *testing.T) {
	for _, act := range []specs.LinuxSeccompAction{specs.ActAllow, specs.ActLog, specs.ActTrace, specs.ActNotify} {
		prof := dockerprofile.DefaultProfile()
		prof.DefaultAction = act
		if _, err := compile(prof, profileEnv{arch: profileArch}); err == nil {
			t.Errorf("default action %s accepted", act)
		}
	}
}

// sigchld is SIGCHLD as clone(2)'s exit-signal byte.
const sigchld = uint64(unix.SIGCHLD)

// TestUpstreamConditionBug pins the go-seccomp-bpf v1.6.0 miscompilation
// that assemble works around: compiled by the library alone, the same policy
// denies the Go runtime's thread clone and allows socket(56). If this test
// fails after a library upgrade, the bug may be fixed and assemble.go's split
// could be dropped (re-run the whole suite before doing so).
func TestUpstreamConditionBug(t *testing.T) {
	c, _ := sandboxSimulator(t)
	p := clonePolicy(c.policy)
	insts, err := p.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	sim := newSimulator(t, insts)
	const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	if v := sim.run(t, native(unix.SYS_CLONE, threadFlags)); v == retAllow {
		t.Error("library-compiled policy now allows thread clone: upstream bug fixed?")
	}
	if v := sim.run(t, native(unix.SYS_SOCKET, 56)); v != retAllow {
		t.Error("library-compiled policy now denies socket(56): upstream bug fixed?")
	}
}
