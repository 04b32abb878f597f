package gvisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
)

// Platforms runsc can run on. KVM needs hardware virtualisation that works
// for gVisor; systrap works wherever seccomp does.
const (
	PlatformSystrap = "systrap"
	PlatformKVM     = "kvm"
	PlatformPtrace  = "ptrace"
)

// DefaultMemoryOverhead is added to every sandbox's memory limit for the
// Sentry and gofer themselves (their Go runtimes, page tables, the overlay's
// metadata), so that a job's memory_mb is roughly what its own code may use,
// as with the namespaces backend.
const DefaultMemoryOverhead = 48 << 20

// Options configure the backend.
type Options struct {
	// StateDir holds the init binary, bundles and runsc's state.
	// Default: /run/scratchrun-gvisor.
	StateDir string
	// CgroupParent names the cgroup directory all sandboxes live under.
	// Default: scratchrun-gvisor (not the namespaces backend's, so that
	// neither sweeps the other's groups).
	CgroupParent string
	// Logger receives the backend's own diagnostics (never user data).
	Logger *slog.Logger
	// InitBinary is the sandbox init program (see hostside.InitProgram). Default:
	// scratchrun-init next to the running executable, else the running
	// executable itself (which must call goinit.RunIfRequested first thing).
	InitBinary string
	// Runsc is the runsc binary. Default: the pinned build cached by
	// scripts/install-runsc.sh, else runsc on PATH.
	Runsc string
	// Platform forces a runsc platform; empty picks KVM when it works here,
	// else systrap.
	Platform string
	// MemoryOverheadBytes is added to each sandbox's memory limit for the
	// Sentry and gofer; 0 means DefaultMemoryOverhead, negative means none.
	MemoryOverheadBytes int64
	// DebugLogDir, when set, makes runsc write its debug logs there (one
	// file per runsc process): for diagnosing runsc itself, never in
	// production (they are large and slow every sandbox down).
	DebugLogDir string
	// ProbeCacheDir keeps the start-up probe's verdict for this boot,
	// shared by engines (default hostside.DefaultProbeCacheDir).
	ProbeCacheDir string
	// bootIDFile names the host's boot for the probe's verdict (tests:
	// another boot); empty is the kernel's.
	bootIDFile string
}

// Backend creates gVisor sandboxes.
type Backend struct {
	opts        Options
	runsc       string
	platform    string
	runscRoot   string
	bundles     string
	initPath    string
	dynamicInit bool
	probeCached bool
	cgroups     *cgroups.Manager
	instance    string
	// views show images to the sandboxes' uids (idmap.SandboxBase), which
	// own no image file.
	views       *idmap.Views
	seq         atomic.Uint64
	overhead    int64
	limitations []string
	unenforced  []sandbox.Limit
	// unenforcedWhy is why the host does not let it enforce them.
	unenforcedWhy string
	confinement   hostside.Confinement
	initCaps      []string
}

var _ sandbox.Backend = (*Backend)(nil)
var _ sandbox.MemoryBudget = (*Backend)(nil)

// DefaultStateDir is where the backend keeps its files when Options.StateDir
// is empty.
const DefaultStateDir = "/run/scratchrun-gvisor"

// New prepares the backend and proves it works: it finds runsc, installs the
// init binary, removes what a crashed engine left behind and runs one small
// sandbox end to end, on KVM when that works and on systrap otherwise. Any
// missing piece is reported here, naming it, rather than on the first call.
func New(opts Options) (*Backend, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "scratchrun-gvisor"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ProbeCacheDir == "" {
		opts.ProbeCacheDir = hostside.DefaultProbeCacheDir
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the gvisor isolation level needs root: runsc creates namespaces, cgroups and (for egress) packet sockets; run as root or use --isolation namespaces")
	}
	b := &Backend{opts: opts, overhead: opts.MemoryOverheadBytes}
	if b.overhead == 0 {
		b.overhead = DefaultMemoryOverhead
	} else if b.overhead < 0 {
		b.overhead = 0
	}
	var note string
	var err error
	if b.runsc, note, err = findRunsc(opts.Runsc); err != nil {
		return nil, err
	}
	if note != "" {
		b.limitations = append(b.limitations, note)
	}
	b.runscRoot = filepath.Join(opts.StateDir, "runsc")
	b.bundles = filepath.Join(opts.StateDir, "bundles")
	for _, d := range []string{opts.StateDir, b.runscRoot, b.bundles} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// The gofer runs as the sandboxes' unprivileged uid and must reach the
	// init binary.
	if err := os.Chmod(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", opts.StateDir, err)
	}
	// As in the namespaces backend, Docker's set without CAP_NET_RAW; also
	// without CAP_MKNOD, which the Sentry (unlike a user namespace) would
	// honour: no sandbox needs to create device nodes.
	if b.confinement, err = hostside.NewConfinement(unix.CAP_NET_RAW, unix.CAP_MKNOD); err != nil {
		return nil, err
	}
	b.initCaps = slices.Clone(b.confinement.KeepNames)
	// Init alone holds CAP_SYS_ADMIN (inside the Sentry), to mount /tmp,
	// /code and /dev/shm with inode limits, and drops it before user code;
	// init and its reaper keep CAP_SYS_RESOURCE for themselves (see
	// goinit's lockDownGVisor). User code gets neither.
	for _, c := range []string{"CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"} {
		if !slices.Contains(b.initCaps, c) {
			b.initCaps = append(b.initCaps, c)
		}
	}
	if b.initPath, err = installInit(opts.StateDir, opts.InitBinary); err != nil {
		return nil, err
	}
	if b.dynamicInit = dynamicallyLinked(b.initPath); b.dynamicInit {
		b.limitations = append(b.limitations,
			"the sandbox init program is dynamically linked (scratchrun-init was not found next to the engine): inside gVisor it runs on each image's C library; install both binaries (go build -o DIR ./cmd/scratchrun ./cmd/scratchrun-init)")
	}
	if b.instance, err = hostside.InstanceName(os.Getpid()); err != nil {
		return nil, err
	}
	var why string
	if b.cgroups, err = cgroups.New(opts.CgroupParent); err != nil {
		b.cgroups, why = nil, err.Error()
	} else {
		_, why = b.cgroups.Missing()
	}
	// The process count is enforced inside the Sentry (RLIMIT_NPROC), with or
	// without a cgroup.
	for _, l := range cgroups.Unenforced(b.cgroups) {
		if l != sandbox.LimitProcesses {
			b.unenforced = append(b.unenforced, l)
		}
	}
	if len(b.unenforced) > 0 {
		b.unenforcedWhy = why
		b.limitations = append(b.limitations, sandbox.UnenforcedWarning(b.unenforced, why))
	}
	n, err := b.sweep()
	hostside.LogSweep(opts.Logger, "gVisor sandboxes", n, err)
	n, err = idmap.SweepViews(opts.StateDir, hostside.InstanceAlive)
	hostside.LogSweep(opts.Logger, "image views", n, err)
	b.views = idmap.NewViews(opts.StateDir, b.instance)
	if err := b.choosePlatform(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close implements sandbox.Backend: it removes the images' views, the
// backend's empty cgroup parent directories and the network namespace
// runsc pins in its state directory. Sandboxes must all be destroyed first.
func (b *Backend) Close() error {
	var errs []error
	errs = append(errs, unpinNullNetNS(b.runscRoot))
	if b.views != nil {
		errs = append(errs, b.views.Close())
	}
	if b.cgroups == nil {
		return errors.Join(errs...)
	}
	errs = append(errs, b.cgroups.RemoveParent())
	// runsc creates the controllers ScratchRun does not manage (cpuacct,
	// freezer, ...) below the same parent.
	for _, dir := range cgroups.HierarchyDirs(b.opts.CgroupParent) {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) &&
			!errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.ENOTEMPTY) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "gvisor" }

// Limitations implements sandbox.Backend.
func (b *Backend) Limitations() []string { return b.limitations }

// UnenforcedLimits implements sandbox.Backend.
func (b *Backend) UnenforcedLimits() []sandbox.Limit { return b.unenforced }

// UnenforcedWhy implements sandbox.UnenforcedReason.
func (b *Backend) UnenforcedWhy() string { return b.unenforcedWhy }

// Platform is the runsc platform sandboxes run on ("systrap" or "kvm").
func (b *Backend) Platform() string { return b.platform }

// Runsc is the path of the runsc binary in use.
func (b *Backend) Runsc() string { return b.runsc }

// SetMemoryBudget implements sandbox.MemoryBudget: the limit of the cgroup
// parent every sandbox of this level lives under.
func (b *Backend) SetMemoryBudget(bytes int64) (bool, error) {
	return hostside.SetMemoryBudget(b.cgroups, bytes)
}

// MemoryInUse implements sandbox.MemoryBudget.
func (b *Backend) MemoryInUse() int64 { return hostside.MemoryInUse(b.cgroups) }

// Cgroups exposes the cgroup manager (nil when limits are not enforced), so
// that leak checks can list what is left.
func (b *Backend) Cgroups() *cgroups.Manager { return b.cgroups }

// RunscRoot is runsc's state directory for this backend (leak checks look
// there for containers left behind).
func (b *Backend) RunscRoot() string { return b.runscRoot }

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	if cfg.Session && cfg.Prestart != nil {
		return nil, errors.New("a session sandbox cannot have a pre-started interpreter")
	}
	s, err := b.create(ctx, cfg, b.platform)
	if err != nil {
		return nil, err
	}
	if cfg.Session {
		return &gvSession{gvSandbox: s}, nil
	}
	return s, nil
}

func (b *Backend) create(ctx context.Context, cfg sandbox.Config, platform string) (*gvSandbox, error) {
	id := fmt.Sprintf("%s_%d", b.instance, b.seq.Add(1))
	s := &gvSandbox{id: id, backend: b, background: cfg.Background}
	if err := hostside.StartOrDestroy(s, "gVisor", b.opts.Logger, func() error { return s.start(ctx, cfg, platform) }); err != nil {
		return nil, err
	}
	return s, nil
}

// unpinNullNetNS removes the empty network namespace runsc bind-mounts at
// ROOT/null-netns to speed up later gofers (a mount on the host, which must
// not outlive the backend). Concurrent runsc starts may have stacked several.
func unpinNullNetNS(root string) error {
	path := filepath.Join(root, "null-netns")
	for range 100 {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			break
		}
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove runsc's network namespace pin: %w", err)
	}
	return nil
}
