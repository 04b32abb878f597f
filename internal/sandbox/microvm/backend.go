package microvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// Accelerators a machine runs on.
const (
	// AccelKVM is hardware virtualisation through /dev/kvm.
	AccelKVM = "kvm"
	// AccelTCG is QEMU's software emulation: every guest instruction is
	// translated; slow, for testing.
	AccelTCG = "tcg"
)

// EmulationWarning is how the backend says, at start, that its machines
// run under software emulation (GET /v1/runtimes says it with
// execapi.Info.SoftwareEmulation).
const EmulationWarning = "software emulation: slow; for testing"

// Defaults.
const (
	// DefaultStateDir holds the initramfs and the snapshots (a RAM file
	// system: gone at reboot).
	DefaultStateDir = "/run/scratchrun-microvm"
	// DefaultCacheDir holds the guest kernel (scripts/install-microvm.sh)
	// and the images' EROFS files, kept across reboots.
	DefaultCacheDir = "/var/cache/scratchrun/microvm"
	// DefaultGuestOverhead is added to a sandbox's memory limit to size
	// its guest's RAM: the guest kernel and its page tables, the agent,
	// the files the agent writes for the job, and the image's page cache,
	// so that the job's own memory_mb is what its guest cgroup may use.
	DefaultGuestOverhead = 160 << 20
	// DefaultHostOverhead is added to the guest's RAM to bound QEMU from
	// outside: QEMU itself and software emulation's translation cache.
	DefaultHostOverhead = 192 << 20
	// tbMiB is that translation cache's size.
	tbMiB = 64
)

// Options configure the backend.
type Options struct {
	// StateDir holds the initramfs, the probe's image and snapshots.
	StateDir string
	// CacheDir holds the guest kernel (kernel/current) and the images'
	// EROFS files (rootfs/).
	CacheDir string
	// CgroupParent names the cgroup directory QEMU processes live under.
	// Default: scratchrun-microvm.
	CgroupParent string
	// Logger receives the backend's own diagnostics (never user data).
	Logger *slog.Logger
	// InitBinary is the guest agent program (see hostside.InitProgram).
	InitBinary string
	// QEMU is qemu-system-x86_64's path; default: found on PATH.
	QEMU string
	// Kernel is the guest kernel: a directory as scripts/install-microvm.sh
	// caches one, or a kernel image with every driver built in. Default:
	// CacheDir/kernel/current.
	Kernel string
	// KVMDevice is the KVM device to probe (default /dev/kvm); a missing
	// or unusable one means software emulation.
	KVMDevice string
	// Accel forces AccelKVM or AccelTCG; empty probes KVM first.
	Accel string
	// ProbeCacheDir keeps the accelerator probe's verdict for this boot,
	// shared by engines (default /run/scratchrun).
	ProbeCacheDir string
	// NoSnapshots boots every guest, rather than restoring a saved,
	// booted one (see snapshot.go).
	NoSnapshots bool
	// UIDLockFile is where the engines of a host take QEMU's uids, so
	// that no two live VMs share one (default DefaultUIDLockFile): every
	// engine of a host must use the same.
	UIDLockFile string
}

// Backend creates microVM sandboxes.
type Backend struct {
	opts          Options
	vmm           VMM
	kernel        guestKernel
	initProgram   string
	initramfs     string
	images        *rootImages
	cgroups       *cgroups.Manager
	instance      string
	seq           atomic.Uint64
	accel         string
	guestOverhead int64
	hostOverhead  int64
	vmmAsRoot     bool
	kvmGroup      int
	limitations   []string
	confinement   hostside.Confinement
	snapshots     *snapshots // nil: every guest boots
	uids          *vmmUIDs
}

var (
	_ sandbox.Backend   = (*Backend)(nil)
	_ sandbox.Emulation = (*Backend)(nil)
)

// New prepares the backend and proves it works: it finds QEMU, mkfs.erofs
// and the guest kernel, builds the initramfs, removes what a crashed
// engine left and boots one machine to its agent, on KVM when that works
// and under software emulation otherwise (saying so). Any missing piece is
// reported here, naming it, rather than on the first call.
func New(opts Options) (*Backend, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "scratchrun-microvm"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Kernel == "" {
		opts.Kernel = filepath.Join(opts.CacheDir, "kernel", "current")
	}
	if opts.KVMDevice == "" {
		opts.KVMDevice = "/dev/kvm"
	}
	if opts.ProbeCacheDir == "" {
		opts.ProbeCacheDir = hostside.DefaultProbeCacheDir
	}
	if opts.UIDLockFile == "" {
		opts.UIDLockFile = DefaultUIDLockFile
	}
	if opts.Accel != "" && opts.Accel != AccelKVM && opts.Accel != AccelTCG {
		return nil, fmt.Errorf("microvm accelerator %q: want kvm or tcg", opts.Accel)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the microvm isolation level needs root: it puts QEMU in cgroups, runs it as uids of its own and makes tap devices; run as root or use --isolation namespaces")
	}
	qemu := opts.QEMU
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	qemuPath, err := exec.LookPath(qemu)
	if err != nil {
		return nil, fmt.Errorf("QEMU (%s) is not installed: %w; install it with scripts/install-microvm.sh (Debian package qemu-system-x86), or set SCRATCHRUN_QEMU", qemu, err)
	}
	mkfs, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		return nil, fmt.Errorf("mkfs.erofs is not installed: %w; install it with scripts/install-microvm.sh (Debian package erofs-utils)", err)
	}
	b := &Backend{opts: opts, vmm: &QEMUVMM{Binary: qemuPath, TBMiB: tbMiB}, hostOverhead: DefaultHostOverhead, kvmGroup: -1}
	if b.kernel, err = findKernel(opts.Kernel); err != nil {
		return nil, err
	}
	b.images = &rootImages{dir: filepath.Join(opts.CacheDir, "rootfs"), mkfs: mkfs, mountDir: opts.StateDir}
	for _, d := range []string{opts.StateDir, b.images.dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
		// QEMU runs as an unprivileged uid and opens files below.
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
	}
	// As in gVisor: Docker's set without CAP_NET_RAW and CAP_MKNOD (a
	// guest's root would otherwise make nodes of its own drive and ports).
	if b.confinement, err = hostside.NewConfinement(unix.CAP_NET_RAW, unix.CAP_MKNOD); err != nil {
		return nil, err
	}
	b.initProgram = hostside.InitProgram(opts.InitBinary)
	if b.initramfs, err = buildInitramfs(opts.StateDir, b.initProgram, b.kernel); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(b.initramfs); err == nil {
		b.guestOverhead = DefaultGuestOverhead + fi.Size()
	}
	if b.instance, err = hostside.InstanceName(os.Getpid()); err != nil {
		return nil, err
	}
	// Memory, processes and CPU are enforced inside the guest, by its own
	// kernel; the host cgroup only bounds QEMU from outside.
	if b.cgroups, err = cgroups.New(opts.CgroupParent); err != nil {
		b.limitations = append(b.limitations, fmt.Sprintf("QEMU is not bounded by a host cgroup (%v); the guest kernel still enforces every limit", err))
		b.cgroups = nil
	} else if missing, why := b.cgroups.Missing(); len(missing) > 0 {
		b.limitations = append(b.limitations, fmt.Sprintf("QEMU's host cgroup lacks %v (%s); the guest kernel still enforces every limit", missing, why))
	}
	if err := sweepBuildMounts(opts.StateDir); err != nil {
		opts.Logger.Warn("cleaning up image builds of an earlier engine", "err", err)
	}
	// QEMU processes died with their engines (parent-death signal): what
	// is left of a dead engine's sandboxes is their cgroups.
	n, err := hostside.SweepDeadEngines(b.cgroups)
	hostside.LogSweep(opts.Logger, "microVM sandboxes", n, err)
	if b.uids, err = openVMMUIDs(opts.UIDLockFile); err != nil {
		return nil, err
	}
	if err := b.chooseAccel(); err != nil {
		b.Close()
		return nil, err
	}
	if !opts.NoSnapshots {
		dir := filepath.Join(opts.CacheDir, "snapshots")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Close()
			return nil, err
		}
		sweepSnapshots(dir)
		b.snapshots = &snapshots{dir: dir, instance: b.instance}
	}
	return b, nil
}

// Close implements sandbox.Backend: it removes the initramfs, the probe's
// files and the empty cgroup parent. Sandboxes must all be destroyed
// first.
func (b *Backend) Close() error {
	var errs []error
	for _, f := range []string{b.initramfs, filepath.Join(b.opts.StateDir, "probe.erofs"), filepath.Join(b.opts.StateDir, "probe-root")} {
		if f == "" {
			continue
		}
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, err)
		}
	}
	if b.snapshots != nil {
		errs = append(errs, b.snapshots.removeAll())
	}
	if b.cgroups != nil {
		errs = append(errs, b.cgroups.RemoveParent())
	}
	if b.uids != nil {
		errs = append(errs, b.uids.close())
	}
	return errors.Join(errs...)
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "microvm" }

// Limitations implements sandbox.Backend.
func (b *Backend) Limitations() []string { return b.limitations }

// UnenforcedLimits implements sandbox.Backend: none, the guest kernel
// enforces every limit.
func (b *Backend) UnenforcedLimits() []sandbox.Limit { return nil }

// SoftwareEmulation implements sandbox.Emulation: true when machines run
// under TCG.
func (b *Backend) SoftwareEmulation() bool { return b.accel == AccelTCG }

// Accel is the accelerator machines run on (AccelKVM or AccelTCG).
func (b *Backend) Accel() string { return b.accel }

// KernelRelease is the guest kernel's release, as `uname -r` in a guest
// shows it ("" for a kernel image given alone).
func (b *Backend) KernelRelease() string { return b.kernel.Release }

// Cgroups exposes the cgroup manager (nil without one), for leak checks.
func (b *Backend) Cgroups() *cgroups.Manager { return b.cgroups }

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	if cfg.Session && cfg.Prestart != nil {
		return nil, errors.New("a session sandbox cannot have a pre-started interpreter")
	}
	s, err := b.create(ctx, cfg, b.accel)
	if err != nil {
		return nil, err
	}
	if cfg.Session {
		return &vmSession{vmSandbox: s}, nil
	}
	return s, nil
}

func (b *Backend) create(ctx context.Context, cfg sandbox.Config, accel string) (*vmSandbox, error) {
	seq := b.seq.Add(1)
	id := fmt.Sprintf("%s_%d", b.instance, seq)
	s := &vmSandbox{id: id, seq: seq, backend: b, background: cfg.Background}
	if err := hostside.StartOrDestroy(s, "microVM", b.opts.Logger, func() error { return s.start(ctx, cfg, accel) }); err != nil {
		return nil, err
	}
	return s, nil
}
