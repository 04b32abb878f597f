package goinit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp/bpfload"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// GVisorInitPath is argv[0] of init in a gVisor sandbox. runsc executes the
// init program from an open file (--exec-fd), so no such path exists inside;
// the name only tells the binary, with argv[1], which role it plays.
const GVisorInitPath = "/.scratchrun/init"

// GVisorProbePath is how the probe job names the init program: init's child
// executes its own image again.
const GVisorProbePath = "/proc/self/exe"

// Roles the binary plays at GVisorInitPath, given as argv[1].
const (
	// GVisorRoleInit is pid 1 of a gVisor sandbox: the same control/status
	// protocol as a namespaces sandbox, on the same descriptors (runsc hands
	// them over with --pass-fd), without building the file system.
	GVisorRoleInit = "gvisor-init"
	// GVisorRoleProbe prints GVisorProbeOutput and exits 0: the job the
	// gVisor backend runs once at start to prove the whole path works.
	GVisorRoleProbe = "probe"
)

// GVisorProbeOutput is what GVisorRoleProbe prints on stdout.
const GVisorProbeOutput = "scratchrun gvisor probe ok\n"

// runOtherRole runs the role named by argv when the binary was started as
// something other than a namespaces init, and reports whether it did (the
// process must then exit with code). It is the only entry point init.go
// calls into this file.
func runOtherRole() (code int, ran bool) {
	if len(os.Args) != 2 {
		return 0, false
	}
	switch {
	case os.Args[0] == GVisorInitPath && os.Args[1] == GVisorRoleInit:
		runtime.LockOSThread()
		return runGVisorInit(), true
	case os.Args[0] == GVisorInitPath && os.Args[1] == gvisorRoleReaper:
		runtime.LockOSThread()
		return runReaper(), true
	case os.Args[0] == GVisorInitPath && os.Args[1] == gvisorRoleKeeper:
		runtime.LockOSThread()
		return runKeeper(), true
	case os.Args[0] == GVisorInitPath && os.Args[1] == gvisorRoleKernelKeeper:
		runtime.LockOSThread()
		return runKernelKeeper(), true
	case os.Args[0] == MicroVMInitPath && os.Args[1] == MicroVMRole && os.Getpid() == 1:
		return runMicroVMAgent(), true
	case os.Args[0] == MicroVMInitPath && os.Args[1] == microVMRoleRestore && os.Getpid() != 1:
		return runRestoreHelper(), true
	case os.Args[0] == GVisorProbePath && os.Args[1] == GVisorRoleProbe:
		if _, err := os.Stdout.WriteString(GVisorProbeOutput); err != nil {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// runGVisorInit is init inside gVisor, pid 1 of the container. gVisor's
// Sentry has already built the root (the image under an in-memory overlay),
// /proc, /dev, the namespaces and the capability sets; init adds what the
// OCI runtime cannot express and then serves the engine's protocol.
//
// User code never runs beside it: it runs under a reaper (reaper.go) in a
// pid namespace of its own, where init cannot be named. The Sentry, unlike
// Linux, does not shield a pid namespace's init from signals its own
// processes send, and a Go program dies of (or stops at) many: beside user
// code, init would lose the result to a SIGQUIT, SIGSEGV or SIGSTOP sent to
// pid 1. The reaper shrugs off what it can and shields itself from the
// rest (shield.go), init continues it when it is stopped, and its death
// would end the program's processes but not init's report.
func runGVisorInit() int {
	// Nothing init inherited beyond its five descriptors may reach user
	// code, whatever the engine's own parent left open in it.
	_ = unix.CloseRange(initproto.StatusFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	control := os.NewFile(initproto.ControlFD, "control")
	status := os.NewFile(initproto.StatusFD, "status")
	unix.CloseOnExec(initproto.ControlFD)
	unix.CloseOnExec(initproto.StatusFD)
	shieldFromSignals()
	setup, ok := readSetup(control, status)
	if !ok {
		return 1
	}
	r, err := prepareGVisor(setup)
	if !reportReady(status, err) {
		return 1
	}
	if setup.Session {
		r.serveSession(control, status, nil)
		return 0
	}
	var job initproto.JobMessage
	if err := initproto.ReadMessage(control, initproto.MaxJobBytes, &job); err != nil {
		// The engine went away or destroyed us unused: nothing to report.
		r.end()
		return 0
	}
	control.Close()
	if err := initproto.WriteMessage(status, r.runJob(job)); err != nil {
		return 1
	}
	return 0
}

// prepareGVisor finishes the sandbox, starts the reaper (which starts the
// pre-started interpreter, if any) and confines init. It confines before
// reporting ready whether the sandbox is warm or not: one order of steps.
func prepareGVisor(setup initproto.SetupMessage) (*reaper, error) {
	tasks, err := prepareFileSystems(setup)
	if err != nil {
		return nil, err
	}
	r, err := startReaper(setup)
	if err != nil {
		return nil, err
	}
	r.tasks = tasks
	if err := lockDownGVisor(setup); err != nil {
		r.end()
		return nil, err
	}
	return r, nil
}

// prepareFileSystems mounts the size- and inode-limited tmpfs file systems
// (runsc passes only size and mode to an OCI tmpfs mount, so a million empty
// files would otherwise fit), makes /proc's writable corners read-only,
// writes the resolver configuration for egress and returns the counter of
// the sandbox's tasks (nil when there is none). It needs CAP_SYS_ADMIN
// inside the Sentry, which lockDownGVisor then drops.
func prepareFileSystems(s initproto.SetupMessage) (*os.File, error) {
	if len(s.UserNamespaceLimits) > 0 || len(s.Rlimits) > 0 {
		// The Sentry implements inotify, signal queues and message queues
		// itself and refuses those rlimits: a setup that asks for them was
		// meant for another backend.
		return nil, errors.New("setup asks for kernel limits the gVisor init does not apply")
	}
	// Before /tmp gets its own file system: the counter's is mounted there
	// for a moment. Without it the process limit is still enforced (the
	// Sentry's RLIMIT_NPROC), only not reported.
	tasks, _ := countTasks("/tmp")
	return tasks, mountScratch(s)
}

// mountScratch mounts the size- and inode-limited tmpfs file systems,
// makes /proc's writable corners read-only and writes the resolver
// configuration for egress: what every sandbox the Go init builds gets.
func mountScratch(s initproto.SetupMessage) error {
	// An engine that forgot the /proc lists must not get an unmasked /proc.
	if len(s.MaskPaths) == 0 || len(s.ReadOnlyPaths) == 0 {
		return errors.New("setup has no /proc paths to mask")
	}
	for _, m := range []struct {
		path string
		mode string
	}{{"/tmp", "1777"}, {"/code", "0755"}, {"/dev/shm", "1777"}} {
		if err := os.MkdirAll(m.path, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", m.path, err)
		}
		if err := mount("tmpfs", m.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
			fmt.Sprintf("size=%d,nr_inodes=%d,mode=%s", s.TmpBytes, s.MaxInodes, m.mode)); err != nil {
			return err
		}
	}
	// The Sentry's /proc shows no host state, but some of it is writable
	// (the UTS hostname, a no-op sysrq-trigger): hide and freeze the same
	// paths as in a namespaces sandbox, so that both refuse the same writes.
	if err := maskProc("/", s); err != nil {
		return err
	}
	if len(s.DNS) > 0 {
		return writeResolvConf(s.DNS)
	}
	return nil
}

// lockDownGVisor confines init (and the reaper, which does the same before
// any user code): capabilities cut to the kept set (bounding, permitted,
// effective; CAP_SYS_ADMIN was only for the mounts), the process made
// non-dumpable so user code cannot read its descriptors, and the same
// seccomp program as a namespaces sandbox. The Sentry is the real boundary;
// the filter keeps the system-call surface user code reaches identical
// across backends, which also narrows what of the Sentry it can exercise.
//
// Init and the reaper keep CAP_SYS_RESOURCE for themselves (never in the
// bounding set user code gets): the Sentry lets a task that holds it make
// threads beyond RLIMIT_NPROC, which user code's zombies may have used up,
// and a Go program that cannot make a thread dies.
func lockDownGVisor(setup initproto.SetupMessage) error {
	if err := dropBoundingSet(setup.KeepCapabilities); err != nil {
		return err
	}
	if err := limitOwnCapabilities(append(slices.Clone(setup.KeepCapabilities), unix.CAP_SYS_RESOURCE)); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set init non-dumpable: %w", err)
	}
	if err := bpfload.InstallEncoded(setup.Seccomp); err != nil {
		return fmt.Errorf("install seccomp filter: %w", err)
	}
	return nil
}

// limitOwnCapabilities keeps only keep in the process's permitted and
// effective sets.
func limitOwnCapabilities(keep []uintptr) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	var mask [2]uint32
	for _, c := range keep {
		if c < 64 {
			mask[c/32] |= 1 << (c % 32)
		}
	}
	for i := range data {
		data[i].Permitted &= mask[i]
		data[i].Effective &= mask[i]
		data[i].Inheritable = 0
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("limit init's capabilities: %w", err)
	}
	return nil
}
